"""Span trees of real turns, recorded with the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from engine_helpers import stub_model
from standardagents import (
    Runtime,
    define_agent,
    define_model,
    define_prompt,
    define_tool,
    observability,
)
from standardagents.project import build_registry
from standardagents.server import create_app
from standardagents.store import open_store
from standardagents.testing.openai_stub import StubReply
from test_composition import definitions, full_research

AGENT = define_agent(name="helper", side_a={"prompt": "main"})
_EXPORTER = InMemorySpanExporter()
_PROVIDER = TracerProvider()
_PROVIDER.add_span_processor(SimpleSpanProcessor(_EXPORTER))


@define_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@define_tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (needs a person's approval)."""
    return f"deleted {path}"


def prompt(*tools: str) -> Any:
    return define_prompt(name="main", prompt="You help.", tools=list(tools))


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on for this test, into a fresh in-memory exporter."""
    _EXPORTER.clear()
    observability.set_tracer_provider(_PROVIDER)
    try:
        yield _EXPORTER
    finally:
        observability.set_tracer_provider(None)
        observability.capture_content(None)
        _EXPORTER.clear()


def named(exporter: InMemorySpanExporter, name: str) -> list[Any]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def children(exporter: InMemorySpanExporter, parent: Any) -> list[str]:
    return [s.name for s in sorted(exporter.get_finished_spans(), key=lambda s: s.start_time)
            if s.parent is not None and s.parent.span_id == parent.context.span_id]


async def test_a_tool_round_is_one_agent_span_with_chat_and_tool_spans(stub, make_runtime, spans):
    stub.queue(StubReply(tool_calls=[("add", json.dumps({"a": 2, "b": 3}))], usage={"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}), "It is 5.")
    rt = await make_runtime(AGENT, prompt("add"), add, stub_model(stub))
    result = await rt.run("helper", "2+3?")
    assert result.text == "It is 5."
    (agent,) = named(spans, "invoke_agent helper")
    assert agent.parent is None
    assert children(spans, agent) == ["chat stub-model", "execute_tool add", "chat stub-model"]
    a = agent.attributes
    assert (a["gen_ai.operation.name"], a["gen_ai.agent.name"], a["gen_ai.conversation.id"]) == (
        "invoke_agent", "helper", result.thread_id)
    assert (a["standardagents.execution.id"], a["standardagents.outcome"], a["standardagents.stop_reason"]) == (
        result.execution_id, "response", "complete")
    first, second = named(spans, "chat stub-model")
    c = first.attributes
    assert (c["gen_ai.operation.name"], c["gen_ai.provider.name"], c["gen_ai.request.model"]) == ("chat", "openai", "stub-model")
    assert (c["server.address"], c["server.port"]) == ("127.0.0.1", stub.port)
    assert (c["gen_ai.usage.input_tokens"], c["gen_ai.usage.output_tokens"]) == (11, 4)
    assert c["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert c["standardagents.time_to_first_token"] >= 0
    assert "gen_ai.input.messages" not in c and "gen_ai.output.messages" not in c  # not opted in
    (tool,) = named(spans, "execute_tool add")
    t = tool.attributes
    assert (t["gen_ai.tool.name"], t["gen_ai.tool.call.id"], t["standardagents.tool.origin"], t["standardagents.tool.status"]) == (
        "add", stub.requests[1]["messages"][-1]["tool_call_id"], "code", "success")
    assert "gen_ai.tool.call.arguments" not in t
    # each model request carried its own chat span as the parent
    for chat, headers in zip((first, second), stub.request_headers, strict=True):
        trace_id, span_id = headers["traceparent"].split("-")[1:3]
        assert (int(trace_id, 16), int(span_id, 16)) == (chat.context.trace_id, chat.context.span_id)


async def test_a_chat_span_names_the_server_of_an_endpoint_set_by_openai_base_url(stub, make_runtime, spans,
                                                                                   monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
    stub.queue("Hi.")
    model = define_model(name="default", provider="openai", model="env-model", stream=False, max_retries=0)
    rt = await make_runtime(AGENT, prompt(), model)
    assert (await rt.run("helper", "hello")).text == "Hi."
    (chat,) = named(spans, "chat env-model")
    assert (chat.attributes["server.address"], chat.attributes["server.port"]) == ("127.0.0.1", stub.port)


async def test_message_contents_only_when_opted_in(stub, make_runtime, spans, monkeypatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    stub.queue(StubReply(tool_calls=[("add", json.dumps({"a": 1, "b": 1}))]), "Two.")
    rt = await make_runtime(AGENT, prompt("add"), add, stub_model(stub))
    await rt.run("helper", "1+1?")
    first, second = named(spans, "chat stub-model")
    assert json.loads(first.attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "1+1?"}]}]
    assert json.loads(first.attributes["gen_ai.system_instructions"]) == [{"type": "text", "content": "You help."}]
    assert json.loads(second.attributes["gen_ai.output.messages"])[0]["parts"] == [{"type": "text", "content": "Two."}]
    (tool,) = named(spans, "execute_tool add")
    assert (json.loads(tool.attributes["gen_ai.tool.call.arguments"]), tool.attributes["gen_ai.tool.call.result"]) == (
        {"a": 1, "b": 1}, "2")


async def test_a_subagent_runs_under_the_parent_tool_span(stub, make_runtime, spans):
    full_research(stub)
    rt = await make_runtime(*definitions(stub))
    result = await rt.run("boss", "Research tides.")
    assert result.stop_reason == "complete"
    (boss,) = named(spans, "invoke_agent boss")
    (tool,) = named(spans, "execute_tool researcher")
    (child,) = named(spans, "invoke_agent researcher")
    assert tool.parent.span_id == boss.context.span_id
    assert child.parent.span_id == tool.context.span_id
    assert child.context.trace_id == boss.context.trace_id
    assert child.attributes["gen_ai.conversation.id"] != result.thread_id
    assert child.attributes["standardagents.outcome"] == "session_stop"
    assert "execute_tool write_report" in children(spans, child)
    assert tool.attributes["standardagents.tool.origin"] == "agent"


async def test_an_approval_pause_and_resume_after_a_restart_are_linked(stub, tmp_path: Path, spans):
    defs = [define_agent(name="helper", side_a={"prompt": "main"}), prompt("delete_file"), delete_file, stub_model(stub)]
    db = f"sqlite:///{tmp_path / 'approvals.db'}"
    stub.queue(StubReply(tool_calls=[("delete_file", '{"path": "c.txt"}')]), "Done after restart.")
    rt = await Runtime.open(build_registry(*defs), store=open_store(db))
    paused = await rt.run("helper", "delete c.txt")
    token = paused.payload["approvals"][0]["token"]
    await rt.aclose()
    rt2 = await Runtime.open(build_registry(*defs), store=open_store(db))
    try:
        result = await (await rt2.decide(token, True))
    finally:
        await rt2.aclose()
    assert result.text == "Done after restart."
    first, resumed = sorted(named(spans, "invoke_agent helper"), key=lambda s: s.start_time)
    assert first.attributes["standardagents.outcome"] == "approval_required"
    assert [e.name for e in first.events] == ["standardagents.approval.request"]
    assert first.events[0].attributes["standardagents.tool"] == "delete_file"
    assert resumed.attributes["standardagents.resumed"] is True
    assert resumed.attributes["standardagents.execution.id"] == first.attributes["standardagents.execution.id"]
    (link,) = resumed.links
    assert (link.context.trace_id, link.context.span_id) == (first.context.trace_id, first.context.span_id)
    assert [e.name for e in resumed.events] == ["standardagents.approval.decided"]
    assert children(spans, resumed) == ["execute_tool delete_file", "chat stub-model"]


async def test_a_model_error_then_a_fallback_is_two_chat_spans(stub, make_runtime, spans):
    stub.queue(StubReply(error_status=503), "answer from the fallback")
    primary = stub_model(stub, fallbacks=["backup"])
    backup = stub_model(stub, name="backup")
    rt = await make_runtime(AGENT, prompt(), primary, backup)
    result = await rt.run("helper", "hi")
    assert result.text == "answer from the fallback"
    (agent,) = named(spans, "invoke_agent helper")
    failed, fallback = sorted(named(spans, "chat stub-model"), key=lambda s: s.start_time)
    assert failed.parent.span_id == agent.context.span_id == fallback.parent.span_id
    assert failed.status.status_code is StatusCode.ERROR and failed.attributes["standardagents.model"] == "default"
    assert fallback.status.status_code is StatusCode.UNSET and fallback.attributes["standardagents.model"] == "backup"
    (event,) = fallback.events
    assert (event.name, event.attributes["standardagents.fallback.from"]) == ("standardagents.fallback", "default")


async def test_a_cancelled_turn_ends_its_spans_as_cancelled(stub, make_runtime, spans):
    # the reply stalls after two chunks: still streaming when stop comes, however loaded the machine
    stub.queue(StubReply(text="slow " * 200, chunk_size=5, stall_after_chunks=2))
    rt = await make_runtime(AGENT, prompt(), stub_model(stub))
    thread = await rt.create_thread("helper")
    sub = rt.subscribe(thread.id)
    task = await rt.start(thread.id, "talk slowly")
    while (await sub.get(timeout=10)).type != "message_chunk":
        pass
    assert await rt.stop(thread.id)
    result = await task
    assert result.stop_reason == "cancelled"
    (agent,) = named(spans, "invoke_agent helper")
    (chat,) = named(spans, "chat stub-model")
    assert agent.attributes["standardagents.outcome"] == "cancelled"
    assert chat.parent.span_id == agent.context.span_id
    assert chat.end_time is not None and chat.status.status_code is StatusCode.ERROR


async def test_nothing_is_recorded_or_sent_when_tracing_is_off(stub, make_runtime):
    _EXPORTER.clear()
    assert not observability.tracing_active()
    stub.queue(StubReply(tool_calls=[("add", json.dumps({"a": 2, "b": 3}))]), "5")
    rt = await make_runtime(AGENT, prompt("add"), add, stub_model(stub))
    result = await rt.run("helper", "2+3?")
    assert result.text == "5"
    assert _EXPORTER.get_finished_spans() == ()
    assert all("traceparent" not in h for h in stub.request_headers)
    assert rt.bus._listeners == []


async def test_an_incoming_traceparent_is_the_parent_of_the_execution(runtime, actors, spans):
    app = create_app(runtime, close_runtime=False)
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        created = await c.post("/api/threads", json={"agent": "helper"}, headers=actors.auth("alice"))
        thread_id = created.json()["id"]
        sent = await c.post(f"/api/threads/{thread_id}/messages?wait=true", json={"content": "add 1 and 2"},
                            headers={**actors.auth("alice"), "traceparent": parent})
        assert sent.status_code < 300, sent.text
        await runtime.drain()
    (agent,) = named(spans, "invoke_agent helper")
    assert agent.context.trace_id == 0x0AF7651916CD43DD8448EB211C80319C
    assert agent.parent.span_id == 0xB7AD6B7169203331 and agent.parent.is_remote


async def test_an_mcp_tool_call_carries_the_traceparent_of_its_tool_span(stub, make_runtime, spans):
    import sys

    from standardagents.mcp import define_mcp_server

    server = define_mcp_server("traced", command=sys.executable,
                               args=[str(Path(__file__).parent / "mcp_servers" / "trace_server.py")])
    stub.queue(StubReply(tool_calls=[("seen_traceparent", "{}")]), "Seen.")
    rt = await make_runtime(AGENT, define_prompt(name="main", prompt="x", tools=["mcp:traced"]), server,
                            stub_model(stub))
    result = await rt.run("helper", "which trace?")
    assert result.text == "Seen."
    (tool,) = named(spans, "execute_tool seen_traceparent")
    assert tool.attributes["standardagents.tool.origin"] == "mcp"
    seen = stub.requests[1]["messages"][-1]["content"]
    trace_id, span_id = seen.split("-")[1:3]
    assert (int(trace_id, 16), int(span_id, 16)) == (tool.context.trace_id, tool.context.span_id)


async def test_hooks_are_spans_in_the_turn(stub, make_runtime, spans):
    from standardagents import define_hook

    def fail(state, text, ctx):
        raise RuntimeError("broken hook")

    keep = define_hook(hook="after_system_message", id="keep", execute=lambda state, text, ctx: None)
    broken = define_hook(hook="after_system_message", id="broken", execute=fail)
    stub.queue("Hello.")
    rt = await make_runtime(AGENT, define_prompt(name="main", prompt="x", hooks=["keep", "broken"]), keep, broken,
                            stub_model(stub))
    assert (await rt.run("helper", "hi")).text == "Hello."
    (agent_span,) = named(spans, "invoke_agent helper")
    first, second = sorted(named(spans, "hook after_system_message"), key=lambda s: s.start_time)
    assert first.parent.span_id == agent_span.context.span_id == second.parent.span_id
    assert (first.attributes["standardagents.hook.id"], first.status.status_code) == ("keep", StatusCode.UNSET)
    assert (second.attributes["standardagents.hook.id"], second.status.status_code) == ("broken", StatusCode.ERROR)


async def test_a_guardrail_trip_is_an_event_of_the_turn(stub, make_runtime, spans):
    @define_tool(guardrail=True)
    def no_secrets(text: str) -> dict:
        """Trip on secrets."""
        return {"tripwire": "password" in text, "info": None}

    agent = define_agent(name="helper", side_a={"prompt": "main"}, input_guardrails=["no_secrets"])
    rt = await make_runtime(agent, prompt(), no_secrets, stub_model(stub))
    result = await rt.run("helper", "my password is hunter2")
    assert result.outcome == "guardrail"
    (span,) = named(spans, "invoke_agent helper")
    (event,) = span.events
    assert (event.name, event.attributes["standardagents.guardrail"], event.attributes["standardagents.kind"]) == (
        "standardagents.guardrail", "no_secrets", "input")
    assert children(spans, span) == []


async def test_a_priced_model_call_carries_its_cost(stub, make_runtime, spans):
    stub.queue(StubReply(text="Priced.", usage={"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}))
    rt = await make_runtime(AGENT, prompt(), stub_model(stub, prices={"input": 3.0, "output": 15.0}))
    result = await rt.run("helper", "hi")
    (chat,) = named(spans, "chat stub-model")
    stored = [m for m in await rt.store.list_messages(result.thread_id) if m.role == "assistant"][-1]
    assert stored.cost is not None and stored.cost > 0
    assert chat.attributes["standardagents.cost_usd"] == pytest.approx(stored.cost)


def test_the_openai_door_takes_the_callers_traceparent(stub, tmp_path: Path, spans):
    import openai

    from server_fixtures import serve_app, write_project

    project = write_project(tmp_path / "project", {"agents/models/default.py": f"""
        from standardagents import define_model
        default = define_model(name="default", provider="openai", model="stub-model",
                               base_url="{stub.base_url}", max_retries=0)
    """})
    stub.queue("Hello from the door.")
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    for server in serve_app(project, f"sqlite+aiosqlite:///{tmp_path / 'door.db'}"):
        client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key=server.token, max_retries=0)
        reply = client.chat.completions.create(model="helper", messages=[{"role": "user", "content": "hi"}],
                                               extra_headers={"traceparent": parent})
        client.close()
        assert reply.choices[0].message.content == "Hello from the door."
    (agent,) = named(spans, "invoke_agent helper")
    assert agent.context.trace_id == 0x4BF92F3577B34DA6A3CE929D0E0E4736
    assert agent.parent.span_id == 0x00F067AA0BA902B7
    (chat,) = named(spans, "chat stub-model")
    assert stub.request_headers[0]["traceparent"].split("-")[1] == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert chat.parent.span_id == agent.context.span_id


async def test_an_execution_record_names_the_trace_of_its_turn(stub, make_runtime, spans):
    from standardagents.engine.steps import load_execution

    stub.queue(StubReply(tool_calls=[("add", json.dumps({"a": 2, "b": 3}))]), "It is 5.")
    rt = await make_runtime(AGENT, prompt("add"), add, stub_model(stub))
    result = await rt.run("helper", "2+3?")
    (agent,) = named(spans, "invoke_agent helper")
    record = await rt.store.get_execution(result.execution_id)
    assert record is not None
    detail = await load_execution(rt.store, record)
    assert detail["traceId"] == format(agent.context.trace_id, "032x")
    assert len(detail["steps"]) == 2


@define_tool
async def remind(note: str, state: Any = None) -> str:
    """Schedule a reminder for later."""
    return await state.schedule_effect("send_reminder", {"note": note}, delay=3600)


async def send_reminder(state: Any, args: dict[str, Any]) -> str:
    if args["note"] == "fail":
        raise ConnectionError("mail server unreachable")
    return "sent"


async def test_an_effect_run_after_a_restart_links_to_the_span_that_scheduled_it(stub, tmp_path: Path, spans):
    from standardagents import define_effect
    from standardagents.engine.effects import EffectScheduler
    from standardagents.records import now_ms

    defs = [AGENT, prompt("remind"), remind, stub_model(stub),
            define_effect("send_reminder", "Send a reminder.", {"type": "object"}, send_reminder, max_attempts=1)]
    db = f"sqlite:///{tmp_path / 'effects.db'}"
    stub.queue(StubReply(tool_calls=[("remind", '{"note": "milk"}'), ("remind", '{"note": "fail"}')]), "Scheduled.")
    rt = await Runtime.open(build_registry(*defs), store=open_store(db))
    result = await rt.run("helper", "remind me")
    await rt.aclose()
    assert result.text == "Scheduled."
    # the tool calls start in the reply's order: the first scheduled "milk", the second "fail"
    scheduled_by = dict(zip(["milk", "fail"], sorted(named(spans, "execute_tool remind"), key=lambda s: s.start_time),
                            strict=True))
    rt2 = await Runtime.open(build_registry(*defs), store=open_store(db))
    try:
        ran = await EffectScheduler(rt2).run_due(now_ms() + 7_200_000)
    finally:
        await rt2.aclose()
    assert {e.args["note"]: e.status for e in ran} == {"milk": "done", "fail": "failed"}
    effect_spans = {s.attributes["standardagents.effect.id"]: s for s in named(spans, "effect send_reminder")}
    assert set(effect_spans) == {e.id for e in ran}
    for effect in ran:
        span = effect_spans[effect.id]
        assert span.parent is None
        assert span.attributes["standardagents.effect.attempt"] == 1
        assert span.attributes["gen_ai.conversation.id"] == effect.thread_id
        (link,) = span.links
        assert link.attributes == {"standardagents.link": "scheduled_by"}
        scheduler = scheduled_by[effect.args["note"]]
        assert (link.context.trace_id, link.context.span_id) == (scheduler.context.trace_id, scheduler.context.span_id)
        if effect.status == "failed":
            assert span.status.status_code == StatusCode.ERROR
            assert [e.name for e in span.events] == ["exception"]
        else:
            assert span.status.status_code == StatusCode.UNSET
