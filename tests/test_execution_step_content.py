"""``GET /api/executions/{id}/steps/{n}``: the messages a model step was sent (system prompt
first, as rendered), the tool schemas offered and the reply, rebuilt from the step records and
equal to what the model endpoint received."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from engine_helpers import stub_model
from standardagents import Runtime, define_agent, define_prompt, define_tool
from standardagents.project import build_registry
from standardagents.server import create_app
from standardagents.testing.openai_stub import OpenAIStub, StubReply

USAGE = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}


def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


class Served:
    def __init__(self, rt: Runtime, client: httpx.AsyncClient, alice: str, bob: str) -> None:
        self.rt, self.client = rt, client
        self.alice = {"Authorization": f"Bearer {alice}"}
        self.bob = {"Authorization": f"Bearer {bob}"}

    async def turn(self, text: str) -> tuple[str, str]:
        """Run one turn on a new thread: (thread id, execution id)."""
        tid = (await self.client.post("/api/threads", json={"agent": "calc"}, headers=self.alice)).json()["id"]
        done = await self.client.post(f"/api/threads/{tid}/messages?wait=true", json={"content": text},
                                      headers=self.alice)
        assert done.status_code == 200, done.text
        runs = (await self.client.get(f"/api/threads/{tid}/executions", headers=self.alice)).json()["executions"]
        return tid, runs[-1]["id"]


@pytest.fixture
async def served(backend: Any, stub: OpenAIStub) -> AsyncIterator[Served]:
    definitions = [define_agent(name="calc", side_a={"prompt": "p", "stop_on_response": True, "max_steps": 4}),
                   define_prompt(name="p", prompt="You add numbers.", tools=["add"]),
                   define_tool(add), stub_model(stub)]
    rt = await Runtime.open(build_registry(*definitions), store=backend.new_store())
    try:
        alice = await rt.store.create_user("alice")
        bob = await rt.store.create_user("bob")
        _, alice_token = await rt.store.create_api_token(alice.id, "t")
        _, bob_token = await rt.store.create_api_token(bob.id, "t")
        app = create_app(rt, close_runtime=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            yield Served(rt, client, alice_token, bob_token)
    finally:
        await rt.aclose()


async def test_each_step_serves_the_messages_and_tools_the_model_received(served, stub):
    stub.queue(StubReply(tool_calls=[("add", '{"a": 2, "b": 40}')], usage=USAGE),
               StubReply(text="It is 42.", usage=USAGE))
    _, eid = await served.turn("2+40?")
    received = list(stub.requests)
    assert len(received) == 2
    first = (await served.client.get(f"/api/executions/{eid}/steps/0", headers=served.alice)).json()
    second = (await served.client.get(f"/api/executions/{eid}/steps/1", headers=served.alice)).json()
    for step, body in ((first, received[0]), (second, received[1])):
        assert step["messages"] == body["messages"]
        assert step["tools"] == body["tools"]
        assert step["exact"] is True
    assert first["messages"][0] == {"role": "system", "content": "You add numbers."}
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]
    assert [t["function"]["name"] for t in first["tools"]] == ["add"]
    assert first["tools"][0]["function"]["parameters"]["required"] == ["a", "b"]


async def test_a_step_serves_its_reply_and_its_tool_calls_results(served, stub):
    stub.queue(StubReply(tool_calls=[("add", '{"a": 2, "b": 40}')], usage=USAGE),
               StubReply(text="It is 42.", usage=USAGE))
    tid, eid = await served.turn("2+40?")
    first = (await served.client.get(f"/api/executions/{eid}/steps/0", headers=served.alice)).json()
    second = (await served.client.get(f"/api/executions/{eid}/steps/1", headers=served.alice)).json()
    (call,) = first["reply"]["toolCalls"]
    assert (call["name"], json.loads(call["arguments"])) == ("add", {"a": 2, "b": 40})
    assert first["reply"]["content"] is None and first["reply"]["status"] == "complete"
    (ran,) = first["toolCalls"]
    assert (ran["id"], ran["status"], ran["result"], ran["error"]) == (call["id"], "success", "42", None)
    assert ran["durationMs"] >= 0
    assert second["reply"] == {"content": "It is 42.", "reasoning": None, "status": "complete", "toolCalls": []}
    assert (first["index"], second["index"], first["executionId"], first["threadId"]) == (0, 1, eid, tid)
    assert {k: first["usage"][k] for k in USAGE} == USAGE and first["finishReason"] == "tool_calls"


async def test_only_the_first_step_of_a_turn_carries_the_system_prompt_and_schemas(served, stub):
    stub.queue(StubReply(tool_calls=[("add", '{"a": 1, "b": 1}')], usage=USAGE),
               StubReply(text="2", usage=USAGE))
    tid, _ = await served.turn("1+1?")
    replies = [m for m in await served.rt.store.list_messages(tid) if m.role == "assistant"]
    calls = [m.metadata["call"] for m in replies]
    # the first step of the turn carries the system prompt and schemas; the next step the same ones by reference
    assert calls[0]["system"] == "You add numbers." and len(calls[0]["toolSchemas"]) == 1
    assert "system" not in calls[1] and "toolSchemas" not in calls[1]


async def test_an_unknown_step_or_execution_is_a_404_naming_it(served, stub):
    stub.queue(StubReply(text="hello", usage=USAGE))
    _, eid = await served.turn("hi")
    missing = await served.client.get(f"/api/executions/{eid}/steps/1", headers=served.alice)
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == f"execution {eid} has no step 1 (its steps are numbered 0 to 0)"
    unknown = await served.client.get("/api/executions/exe_nope/steps/0", headers=served.alice)
    assert unknown.status_code == 404
    assert unknown.json()["error"]["message"] == "unknown execution 'exe_nope'"


async def test_a_step_is_refused_to_a_caller_who_may_not_read_its_thread(served, stub):
    stub.queue(StubReply(text="hello", usage=USAGE))
    tid, eid = await served.turn("hi")
    other = await served.client.get(f"/api/executions/{eid}/steps/0", headers=served.bob)
    assert other.status_code == 403 and tid in other.json()["error"]["message"]
    assert (await served.client.get(f"/api/executions/{eid}/steps/0")).status_code == 401


async def test_the_openapi_document_lists_the_step_route(served):
    spec = (await served.client.get("/api/openapi.json")).json()
    operation = spec["paths"]["/api/executions/{execution_id}/steps/{n}"]["get"]
    assert sorted(operation["responses"]) == ["200", "400", "401", "403", "404"]


def test_the_docs_example_prints_what_its_comments_say(tmp_path):
    import re
    import subprocess
    import sys
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[1] / "docs" / "web-app.md").read_text(encoding="utf-8")
    found = re.search(r"```python\n(# what_the_model_saw.py\n.*?)```", docs, re.S)
    assert found, "docs/web-app.md shows what_the_model_saw.py"
    script = tmp_path / "what_the_model_saw.py"
    script.write_text(found[1])
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    promised = [line.split("# ", 1)[1] for line in found[1].splitlines() if line.startswith("print(")]
    assert out.stdout.splitlines() == promised
