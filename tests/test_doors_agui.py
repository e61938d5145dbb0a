"""The AG-UI door: every event of a run parsed and validated with ``ag-ui-protocol``'s models,
in order, each run ending with exactly one RUN_FINISHED or RUN_ERROR."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import (
    AssistantMessage,
    Event,
    EventType,
    FunctionCall,
    RunAgentInput,
    Tool,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from pydantic import TypeAdapter

from server_fixtures import Actors, LiveServer, serve_app, write_project
from standardagents.testing.openai_stub import OpenAIStub, StubReply
from test_doors_mcp import EXTRA as MCP_EXTRA

DOCS = Path(__file__).resolve().parent.parent / "docs" / "doors-agui.md"
EVENTS: TypeAdapter[Any] = TypeAdapter(Event)


def _extra(stub_url: str, scripted_url: str) -> dict[str, str]:
    return {
        **{path: text for path, text in MCP_EXTRA.items() if "sentry" in path or "no_secrets" in path},
        "agents/agents/booker.py": """
            from standardagents import define_agent
            booker = define_agent(name="booker", type="ai_human", description="Books with the user's say-so.",
                                  side_a={"prompt": "booker_prompt", "stop_on_response": True})
        """,
        "agents/prompts/booker_prompt.py": """
            from standardagents import define_prompt
            booker_prompt = define_prompt(name="booker_prompt", prompt="You book trips.", model="scripted",
                                          tools=["add"])
        """,
        "agents/models/scripted.py": f"""
            from standardagents import define_model
            scripted = define_model(name="scripted", provider="openai", model="stub-model",
                                    base_url={scripted_url!r}, max_retries=0)
        """,
        "agents/agents/guarded.py": """
            from standardagents import define_agent
            guarded = define_agent(name="guarded", type="ai_human", description="Wipes with permission.",
                                   side_a={"prompt": "guarded_prompt", "stop_on_response": True})
        """,
        "agents/prompts/guarded_prompt.py": """
            from standardagents import define_prompt
            guarded_prompt = define_prompt(name="guarded_prompt", prompt="You wipe.", tools=["wipe"])
        """,
        "agents/tools/wipe.py": """
            from standardagents import define_tool

            @define_tool(needs_approval=True)
            def wipe(target: str) -> str:
                '''Wipe a target.'''
                return f"wiped {target}"
        """,
        "agents/agents/slow.py": """
            from standardagents import define_agent
            slow = define_agent(name="slow", type="ai_human", description="Waits for ever.",
                                side_a={"prompt": "slow_prompt", "stop_on_response": True})
        """,
        "agents/prompts/slow_prompt.py": """
            from standardagents import define_prompt
            slow_prompt = define_prompt(name="slow_prompt", prompt="You wait.", tools=["wait_forever"])
        """,
        "agents/tools/wait_forever.py": """
            import asyncio
            from standardagents import define_tool

            @define_tool
            async def wait_forever() -> str:
                "Wait until stopped."
                await asyncio.Event().wait()
                return "never"
        """,
        "agents/agents/broken.py": """
            from standardagents import define_agent
            broken = define_agent(name="broken", type="ai_human", description="Its model refuses.",
                                  side_a={"prompt": "broken_prompt", "stop_on_response": True})
        """,
        "agents/prompts/broken_prompt.py": """
            from standardagents import define_prompt
            broken_prompt = define_prompt(name="broken_prompt", prompt="You fail.", model="refusing")
        """,
        "agents/models/refusing.py": f"""
            from standardagents import define_model
            refusing = define_model(name="refusing", provider="openai", model="stub-model",
                                    base_url={stub_url!r}, max_retries=0)
        """,
    }


@pytest.fixture
def refusing_stub() -> Any:
    with OpenAIStub(lambda body: StubReply(error_status=400, error_body={"error": {"message": "bad request"}})) as s:
        yield s


@pytest.fixture
def scripted() -> Any:
    with OpenAIStub() as s:
        yield s


@pytest.fixture
def project_dir(tmp_path: Path, refusing_stub: OpenAIStub, scripted: OpenAIStub) -> Path:
    return write_project(tmp_path / "project", _extra(refusing_stub.base_url, scripted.base_url))


def _input(thread: str, text: str, **extra: Any) -> dict[str, Any]:
    run = RunAgentInput(thread_id=thread, run_id=f"run-{len(text)}-{thread}", state={}, tools=[], context=[],
                        forwarded_props={}, messages=[UserMessage(id="m1", role="user", content=text)])
    return {**run.model_dump(by_alias=True, exclude_none=True), **extra}


def parse_run(body: str) -> list[Any]:
    """The run's events, each validated by ag-ui-protocol, checked for a well-formed order."""
    events = [EVENTS.validate_json(line[5:].strip()) for line in body.splitlines() if line.startswith("data:")]
    assert events and events[0].type == EventType.RUN_STARTED
    terminal = [e for e in events if e.type in (EventType.RUN_FINISHED, EventType.RUN_ERROR)]
    assert len(terminal) == 1 and events[-1] is terminal[0]
    open_text: str | None = None
    open_calls: set[str] = set()
    ended_calls: set[str] = set()
    step: str | None = None
    for event in events[1:-1]:
        kind = event.type
        if kind == EventType.TEXT_MESSAGE_START:
            assert open_text is None
            open_text = event.message_id
        elif kind == EventType.TEXT_MESSAGE_CONTENT:
            assert event.message_id == open_text and event.delta
        elif kind == EventType.TEXT_MESSAGE_END:
            assert event.message_id == open_text
            open_text = None
        elif kind == EventType.TOOL_CALL_START:
            assert event.tool_call_id not in open_calls
            open_calls.add(event.tool_call_id)
        elif kind == EventType.TOOL_CALL_ARGS:
            assert event.tool_call_id in open_calls
        elif kind == EventType.TOOL_CALL_END:
            open_calls.remove(event.tool_call_id)
            ended_calls.add(event.tool_call_id)
        elif kind == EventType.TOOL_CALL_RESULT:
            assert event.tool_call_id in ended_calls
        elif kind == EventType.STEP_STARTED:
            assert step is None
            step = event.step_name
        elif kind == EventType.STEP_FINISHED:
            assert event.step_name == step
            step = None
    assert open_text is None and not open_calls and step is None
    return events


async def _run(client: httpx.AsyncClient, agent: str, payload: dict[str, Any], headers: dict[str, str]) -> list[Any]:
    answer = await client.post(f"/ag-ui/{agent}", json=payload, headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/event-stream")
    return parse_run(answer.text)


async def test_a_run_streams_text_tools_and_steps(client: httpx.AsyncClient, actors: Actors) -> None:
    events = await _run(client, "helper", _input("my-thread-1", "add please"), actors.auth("alice"))
    kinds = [e.type for e in events]
    assert kinds[-1] == EventType.RUN_FINISHED and events[-1].outcome.type == "success"
    assert events[0].thread_id == "my-thread-1" and events[-1].thread_id == "my-thread-1"
    for needed in (EventType.TOOL_CALL_START, EventType.TOOL_CALL_ARGS, EventType.TOOL_CALL_END,
                   EventType.TOOL_CALL_RESULT, EventType.TEXT_MESSAGE_START, EventType.TEXT_MESSAGE_CONTENT,
                   EventType.TEXT_MESSAGE_END, EventType.STEP_STARTED, EventType.STEP_FINISHED):
        assert needed in kinds, needed
    start = next(e for e in events if e.type == EventType.TOOL_CALL_START)
    assert start.tool_call_name == "add"
    result = next(e for e in events if e.type == EventType.TOOL_CALL_RESULT)
    assert result.content == "3"  # the offline model calls add with its defaults 1 and 2
    # the AG-UI thread is our thread: the second run continues it
    await _run(client, "helper", _input("my-thread-1", "again"), actors.auth("alice"))
    thread = (await client.get("/api/threads/my-thread-1", headers=actors.auth("alice"))).json()
    assert thread["agent_id"] == "helper" and thread["user_id"] == actors.ids["alice"]
    messages = (await client.get("/api/threads/my-thread-1/messages", headers=actors.auth("alice"))).json()
    assert [m["content"] for m in messages["messages"] if m["role"] == "user"] == ["add please", "again"]


async def test_an_approval_pause_is_an_interrupt(client: httpx.AsyncClient, actors: Actors) -> None:
    events = await _run(client, "guarded", _input("t-guard", "wipe"), actors.auth("alice"))
    last = events[-1]
    assert last.type == EventType.RUN_FINISHED and last.outcome.type == "interrupt"
    assert last.outcome.interrupts[0].reason == "tool_approval"
    assert last.outcome.interrupts[0].metadata["tool"] == "wipe"
    interrupt = last.outcome.interrupts[0].id
    wrong = _input("t-guard", "", resume=[{"interruptId": "nope", "status": "resolved"}])
    answer = await client.post("/ag-ui/guarded", json=wrong, headers=actors.auth("alice"))
    assert answer.status_code == 422 and "nope" in answer.json()["error"]["message"]
    # the next run answers the interrupt: the call is approved and the same execution goes on
    resumed = await _run(client, "guarded", _input("t-guard", "", resume=[{"interruptId": interrupt,
                                                                           "status": "resolved"}]),
                         actors.auth("alice"))
    assert resumed[-1].type == EventType.RUN_FINISHED and resumed[-1].outcome.type == "success"
    assert resumed[-1].metadata["executionId"] == last.metadata["executionId"]
    results = [e.content for e in resumed if e.type == EventType.TOOL_CALL_RESULT]
    assert results and results[0].startswith("wiped")


async def test_a_failing_model_ends_with_run_error(client: httpx.AsyncClient, actors: Actors) -> None:
    events = await _run(client, "broken", _input("t-broken", "hi"), actors.auth("alice"))
    assert events[-1].type == EventType.RUN_ERROR
    assert events[-1].message


async def test_a_tripped_guardrail_ends_with_run_error_and_its_reason(client: httpx.AsyncClient, actors: Actors) -> None:
    events = await _run(client, "sentry", _input("t-sentry", "my password is x"), actors.auth("alice"))
    last = events[-1]
    assert last.type == EventType.RUN_ERROR and last.code == "guardrail_tripped"
    assert re.search(r"no_secrets.*secret-looking", last.message)
    fine = await _run(client, "sentry", _input("t-sentry", "hello"), actors.auth("alice"))
    assert fine[-1].type == EventType.RUN_FINISHED and fine[-1].outcome.type == "success"


async def test_refusals_come_before_the_stream(client: httpx.AsyncClient, actors: Actors) -> None:
    payload = _input("t-x", "hi")
    assert (await client.post("/ag-ui/helper", json=payload)).status_code == 401
    await _run(client, "helper", _input("t-alice", "hi"), actors.auth("alice"))
    foreign = await client.post("/ag-ui/helper", json=_input("t-alice", "hi"), headers=actors.auth("bob"))
    assert foreign.status_code == 403 and "another user" in foreign.json()["error"]["message"]
    unknown = await client.post("/ag-ui/internal", json=payload, headers=actors.auth("alice"))
    assert unknown.status_code == 404
    wrong_agent = await client.post("/ag-ui/guarded", json=_input("t-alice", "hi"), headers=actors.auth("alice"))
    assert wrong_agent.status_code == 422
    bad = await client.post("/ag-ui/helper", json={"threadId": "t"}, headers=actors.auth("alice"))
    assert bad.status_code == 422 and "RunAgentInput" in bad.json()["error"]["message"]
    bad_id = await client.post("/ag-ui/helper", json=_input("no spaces allowed", "hi"), headers=actors.auth("alice"))
    assert bad_id.status_code == 422
    # a front-end tool named like one of the agent's own tools: refused before anything runs
    tools = _input("t-tools", "hi", tools=[{"name": "add", "description": "y", "parameters": {}}])
    clash = await client.post("/ag-ui/helper", json=tools, headers=actors.auth("alice"))
    assert clash.status_code == 400 and "'add'" in clash.json()["error"]["message"]
    assert (await client.get("/api/threads/t-tools", headers=actors.auth("alice"))).status_code == 404
    twice = _input("t-tools", "hi", tools=[{"name": "x", "description": "y", "parameters": {}}] * 2)
    assert (await client.post("/ag-ui/helper", json=twice, headers=actors.auth("alice"))).status_code == 400
    stray = _input("t-alice", "", messages=[{"id": "r1", "role": "tool", "toolCallId": "call_nobody_waits",
                                             "content": "yes"}])
    answer = await client.post("/ag-ui/helper", json=stray, headers=actors.auth("alice"))
    assert answer.status_code == 422 and "call_nobody_waits" in answer.json()["error"]["message"]


@pytest.fixture
def live(project_dir: Path, tmp_path: Path) -> Any:
    yield from serve_app(project_dir, f"sqlite+aiosqlite:///{tmp_path / 'live.db'}")


async def test_a_client_leaving_mid_run_stops_it(live: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=live.base_url, headers=live.headers, timeout=30) as http:
        run = http.stream("POST", "/ag-ui/slow", json=_input("t-slow", "wait"))
        answer = await run.__aenter__()
        async for line in answer.aiter_lines():
            if "TOOL_CALL_START" in line:
                break
        done = None
        async with http.stream("GET", "/api/threads/t-slow/stream") as stream:
            await run.__aexit__(None, None, None)  # the client goes away mid-run
            async for line in stream.aiter_lines():
                if line.startswith("data:") and '"type":"done"' in line:
                    done = line
                    break
    assert done is not None and '"stopReason":"cancelled"' in done


async def test_the_docs_example_runs(live: LiveServer) -> None:
    code = re.search(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert code, "docs/doors-agui.md has a python example"
    env = {**os.environ, "STANDARDAGENTS_URL": live.base_url, "STANDARDAGENTS_TOKEN": live.token}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code[1], env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert lines[0] == "RUN_STARTED" and lines[-1] == "RUN_FINISHED"
    assert "TOOL_CALL_RESULT" in lines


async def test_the_front_end_tools_example_runs(live: LiveServer) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    code = next(b for b in blocks if "ToolMessage" in b)
    env = {**os.environ, "STANDARDAGENTS_URL": live.base_url, "STANDARDAGENTS_TOKEN": live.token}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert lines[:3] == ["waiting: waiting client_tools", "same execution: True", "status: complete"]
    assert lines[3]  # the offline model's summary of the calls' results


CONFIRM = Tool(name="confirm_trip", description="Ask the user to confirm a trip.",
               parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})


def _snapshots(events: list[Any]) -> list[dict[str, Any]]:
    return [e.snapshot for e in events if e.type == EventType.STATE_SNAPSHOT]


async def test_front_end_tools_pause_the_run_and_their_results_continue_it(
        client: httpx.AsyncClient, actors: Actors, scripted: OpenAIStub) -> None:
    scripted.queue(StubReply(tool_calls=[("confirm_trip", '{"city":"Paris"}')]), "Booked Paris.")
    ask = UserMessage(id="u1", role="user", content="Book Paris")
    first = RunAgentInput(thread_id="t-trip", run_id="r1", state={}, tools=[CONFIRM], context=[],
                          forwarded_props={}, messages=[ask])
    events = await _run(client, "booker", first.model_dump(by_alias=True, exclude_none=True), actors.auth("alice"))
    assert [t["function"]["name"] for t in scripted.requests[0]["tools"]] == ["add", "confirm_trip"]
    start = next(e for e in events if e.type == EventType.TOOL_CALL_START)
    assert start.tool_call_name == "confirm_trip"
    args = "".join(e.delta for e in events if e.type == EventType.TOOL_CALL_ARGS and e.tool_call_id == start.tool_call_id)
    assert args == '{"city":"Paris"}'
    assert not [e for e in events if e.type == EventType.TOOL_CALL_RESULT]
    assert events[-1].type == EventType.RUN_FINISHED and events[-1].outcome.type == "success"
    opening, closing = _snapshots(events)
    assert events[1].type == EventType.STATE_SNAPSHOT and events[-2].type == EventType.STATE_SNAPSHOT
    execution = events[-1].metadata["executionId"]
    assert opening == {"threadId": "t-trip", "agent": "booker", "executionId": execution, "status": "running"}
    assert closing["status"] == "waiting" and closing["waitingFor"] == "client_tools"
    # the wait is durable: the execution is stored as waiting
    stored = (await client.get("/api/threads/t-trip/executions", headers=actors.auth("alice"))).json()
    assert [(e["id"], e["status"]) for e in stored["executions"]] == [(execution, "waiting")]
    call = ToolCall(id=start.tool_call_id, type="function",
                    function=FunctionCall(name="confirm_trip", arguments='{"city":"Paris"}'))
    second = RunAgentInput(thread_id="t-trip", run_id="r2", state={}, tools=[CONFIRM], context=[],
                           forwarded_props={}, messages=[
                               ask, AssistantMessage(id="a1", role="assistant", tool_calls=[call]),
                               ToolMessage(id="tm1", role="tool", content="confirmed", tool_call_id=call.id)])
    # someone else cannot answer the calls of alice's run
    foreign = await client.post("/ag-ui/booker", json=second.model_dump(by_alias=True, exclude_none=True),
                                headers=actors.auth("bob"))
    assert foreign.status_code == 403
    # the next run carries the tool result: the same execution goes on
    resumed = await _run(client, "booker", second.model_dump(by_alias=True, exclude_none=True),
                         actors.auth("alice"))
    assert resumed[-1].type == EventType.RUN_FINISHED and resumed[-1].outcome.type == "success"
    assert resumed[-1].metadata["executionId"] == execution
    assert not [e for e in resumed if getattr(e, "tool_call_id", None) == call.id]  # the client knows that call
    assert "".join(e.delta for e in resumed if e.type == EventType.TEXT_MESSAGE_CONTENT) == "Booked Paris."
    assert scripted.requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": call.id, "content": "confirmed"}
    final = _snapshots(resumed)[-1]
    assert final["status"] == "complete" and final["executionId"] == execution
    assert final["usage"]["total_tokens"] > 0
    # the same results again: nothing waits for them any more
    again = await client.post("/ag-ui/booker", json=second.model_dump(by_alias=True, exclude_none=True),
                              headers=actors.auth("alice"))
    assert again.status_code == 422
