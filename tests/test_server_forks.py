"""Renaming and forking threads over the REST API: a fork copies the history up to one
message into a new thread of the same agent, which then runs turns of its own; the source
stays as it was, and the same access rules apply as for reading the thread."""

from __future__ import annotations

from typing import Any

import httpx

API = "/api"


async def _turn(client: httpx.AsyncClient, headers: dict[str, str], text: str) -> tuple[str, list[dict[str, Any]]]:
    r = await client.post(f"{API}/threads", json={"agent": "helper"}, headers=headers)
    assert r.status_code == 201, r.text
    tid = r.json()["id"]
    done = await client.post(f"{API}/threads/{tid}/messages?wait=true", json={"content": text}, headers=headers)
    assert done.status_code == 200, done.text
    messages = (await client.get(f"{API}/threads/{tid}/messages", headers=headers)).json()["messages"]
    return tid, messages


async def test_a_fork_keeps_the_history_up_to_the_message_and_runs_its_own_turns(
        client: httpx.AsyncClient, actors: Any) -> None:
    alice = actors.auth("alice")
    tid, messages = await _turn(client, alice, "please add two numbers")
    assert [m["role"] for m in messages[:3]] == ["user", "assistant", "tool"]
    # a fork ends between steps: not between a tool call and its result
    inside = await client.post(f"{API}/threads/{tid}/fork", json={"messageId": messages[1]["id"]}, headers=alice)
    assert inside.status_code == 422 and messages[2]["id"] in inside.json()["error"]["message"]
    keep = messages[2]
    r = await client.post(f"{API}/threads/{tid}/fork", json={"messageId": keep["id"]}, headers=alice)
    assert r.status_code == 201, r.text
    fork = r.json()
    assert fork["id"] != tid and fork["agent_id"] == "helper" and fork["user_id"] == actors.ids["alice"]
    assert fork["metadata"]["forkedFrom"] == {"threadId": tid, "messageId": keep["id"]}
    assert r.headers["location"] == f"{API}/threads/{fork['id']}"
    copied = (await client.get(f"{API}/threads/{fork['id']}/messages", headers=alice)).json()["messages"]
    assert [(m["role"], m["content"], m["tool_calls"]) for m in copied] == \
        [(m["role"], m["content"], m["tool_calls"]) for m in messages[:3]]
    assert not {m["id"] for m in copied} & {m["id"] for m in messages}
    # the fork runs a turn of its own; the source keeps its messages
    done = await client.post(f"{API}/threads/{fork['id']}/messages?wait=true", json={"content": "again"}, headers=alice)
    assert done.status_code == 200, done.text
    after = (await client.get(f"{API}/threads/{tid}/messages", headers=alice)).json()["messages"]
    assert [m["id"] for m in after] == [m["id"] for m in messages]


async def test_only_a_reader_of_the_thread_may_fork_it_and_bad_input_is_422(
        client: httpx.AsyncClient, actors: Any) -> None:
    tid, messages = await _turn(client, actors.auth("alice"), "hello")
    first = messages[0]["id"]
    r = await client.post(f"{API}/threads/{tid}/fork", json={"messageId": first}, headers=actors.auth("bob"))
    assert r.status_code == 403
    assert (await client.post(f"{API}/threads/thr_nope/fork", json={"messageId": first},
                              headers=actors.auth("alice"))).status_code == 404
    for body in ({}, {"messageId": 3}, {"messageId": "msg_unknown"}, {"messageId": first, "title": 5}):
        r = await client.post(f"{API}/threads/{tid}/fork", json=body, headers=actors.auth("alice"))
        assert r.status_code == 422, (body, r.text)
        assert r.json()["error"]["message"]
    listed = (await client.get(f"{API}/threads", headers=actors.auth("alice"))).json()["threads"]
    assert [t["id"] for t in listed] == [tid]  # nothing half-made by the refused forks
    # an admin may fork another user's thread; the fork is the admin's
    r = await client.post(f"{API}/threads/{tid}/fork", json={"messageId": first, "title": "mine"},
                          headers=actors.auth("root"))
    assert r.status_code == 201 and r.json()["user_id"] == actors.ids["root"] and r.json()["title"] == "mine"


async def test_rename_sets_and_clears_the_title(client: httpx.AsyncClient, actors: Any) -> None:
    alice = actors.auth("alice")
    tid = (await client.post(f"{API}/threads", json={"agent": "helper"}, headers=alice)).json()["id"]
    r = await client.patch(f"{API}/threads/{tid}", json={"title": "  Sums  "}, headers=alice)
    assert r.status_code == 200 and r.json()["title"] == "Sums"
    assert (await client.get(f"{API}/threads/{tid}", headers=alice)).json()["title"] == "Sums"
    assert (await client.patch(f"{API}/threads/{tid}", json={"title": None}, headers=alice)).json()["title"] is None
    for body in ({}, {"title": 1}, {"title": "x" * 201}):
        assert (await client.patch(f"{API}/threads/{tid}", json=body, headers=alice)).status_code == 422
    assert (await client.patch(f"{API}/threads/{tid}", json={"title": "x"},
                               headers=actors.auth("bob"))).status_code == 403
