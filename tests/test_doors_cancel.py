"""The doors cancel executions, not threads: over a real server, an A2A ``tasks/cancel`` of a
task queued behind another client's running turn ends that task before it runs (its message
is never stored), and an AG-UI client that goes away stops only its own run; the other
client's turn on the same thread runs on."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from a2a.types import CancelTaskRequest, GetTaskRequest, TaskState
from ag_ui.core import RunAgentInput, UserMessage

from server_fixtures import LiveServer
from test_doors_a2a import _calling_wait_forever, _client, _message
from test_doors_a2a import server as server  # the fixture


async def _first_task_id(stream: Any) -> str:
    """The task id the first response of a send stream names."""
    async for response in stream:
        if response.HasField("task"):
            return str(response.task.id)
        if response.HasField("status_update"):
            return str(response.status_update.task_id)
    raise AssertionError("the stream ended before naming its task")


async def _execution(live: LiveServer, execution_id: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=live.base_url, headers=live.headers) as http:
        response = await http.get(f"/api/executions/{execution_id}")
    return dict(response.json()) if response.status_code == 200 else {}


async def _until_cancelled(live: LiveServer, execution_id: str) -> dict[str, Any]:
    for _ in range(600):
        record = await _execution(live, execution_id)
        if record.get("status") == "cancelled":
            return record
        await asyncio.sleep(0.05)
    raise AssertionError(f"execution {execution_id} was not cancelled")


async def _user_messages(live: LiveServer, thread_id: str) -> list[str]:
    async with httpx.AsyncClient(base_url=live.base_url, headers=live.headers) as http:
        messages = (await http.get(f"/api/threads/{thread_id}/messages")).json()["messages"]
    return [m["content"] for m in messages if m["role"] == "user"]


async def test_cancelling_a_queued_task_ends_it_before_it_runs_and_leaves_the_running_one(server: LiveServer) -> None:
    async with _client(server, "slow") as first, _client(server, "slow") as second:
        running_stream = first.send_message(_message("wait"))
        running_id = await _calling_wait_forever(running_stream)
        running = await first.get_task(GetTaskRequest(id=running_id))
        queued_stream = second.send_message(_message("and then this", context=running.context_id))
        queued_id = await _first_task_id(queued_stream)
        canceled = await second.cancel_task(CancelTaskRequest(id=queued_id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        await queued_stream.aclose()
        assert (await _until_cancelled(server, queued_id))["status"] == "cancelled"
        still = await first.get_task(GetTaskRequest(id=running_id))
        assert still.status.state == TaskState.TASK_STATE_WORKING
        assert (await _execution(server, running_id))["status"] == "running"
        assert await _user_messages(server, running.context_id) == ["wait"]
        await first.cancel_task(CancelTaskRequest(id=running_id))
        await running_stream.aclose()


async def _statuses(live: LiveServer, thread_id: str) -> dict[str, str]:
    async with httpx.AsyncClient(base_url=live.base_url, headers=live.headers) as http:
        executions = (await http.get(f"/api/threads/{thread_id}/executions")).json()["executions"]
    return {e["id"]: e["status"] for e in executions}


async def test_an_ag_ui_client_going_away_stops_its_own_run_not_the_turn_running_on_its_thread(
        server: LiveServer) -> None:
    async with _client(server, "slow") as first:
        running_stream = first.send_message(_message("wait"))
        running_id = await _calling_wait_forever(running_stream)
        thread_id = (await first.get_task(GetTaskRequest(id=running_id))).context_id
        run = RunAgentInput(thread_id=thread_id, run_id="run-queued", state={}, tools=[], context=[],
                            forwarded_props={}, messages=[UserMessage(id="m-queued", role="user", content="me too")])
        async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers, timeout=30) as http:
            async with http.stream("POST", "/ag-ui/slow", json=run.model_dump(by_alias=True, exclude_none=True)) as answer:
                async for line in answer.aiter_lines():
                    if "RUN_STARTED" in line:
                        break
            # the AG-UI client went away while its run waited behind the A2A client's turn
        for _ in range(600):
            statuses = await _statuses(server, thread_id)
            if "cancelled" in statuses.values():
                break
            await asyncio.sleep(0.05)
        assert sorted(statuses.values()) == ["cancelled", "running"]
        assert statuses[running_id] == "running"
        still = await first.get_task(GetTaskRequest(id=running_id))
        assert still.status.state == TaskState.TASK_STATE_WORKING
        assert await _user_messages(server, thread_id) == ["wait"]
        await first.cancel_task(CancelTaskRequest(id=running_id))
        await running_stream.aclose()


async def test_the_rest_api_cancels_a_queued_turn_by_its_id_and_no_other(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers, timeout=30) as http:
        thread_id = (await http.post("/api/threads", json={"agent": "slow"})).json()["id"]
        async with _client(server, "slow") as first:
            running_stream = first.send_message(_message("wait", context=thread_id))
            running_id = await _calling_wait_forever(running_stream)
            queued = (await http.post(f"/api/threads/{thread_id}/messages", json={"content": "later"})).json()
            assert queued["queued"] is True
            answer = await http.post(f"/api/executions/{queued['executionId']}/cancel")
            assert answer.json() == {"executionId": queued["executionId"], "threadId": thread_id, "cancelled": True}
            again = await http.post(f"/api/executions/{queued['executionId']}/cancel")
            assert again.json()["cancelled"] is False
            unknown = await http.post("/api/executions/exe_unknown/cancel")
            assert unknown.status_code == 404
            assert await _statuses(server, thread_id) == {queued["executionId"]: "cancelled", running_id: "running"}
            assert await _user_messages(server, thread_id) == ["wait"]
            await first.cancel_task(CancelTaskRequest(id=running_id))
            await running_stream.aclose()
