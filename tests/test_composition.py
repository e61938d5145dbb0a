"""Agents as tools: dual_ai subagents in child threads, handoffs to ai_human agents, and
the refusals that keep composition finite."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from engine_helpers import stub_model
from standardagents import Runtime, define_agent, define_hook, define_prompt, define_tool
from standardagents.testing.openai_stub import StubReply

BOSS = "You lead the project."
LEAD = "You research the question."
CRITIC = "You critique the research."

STATUS = {"name": "note_progress", "message_property": "note"}
STOP = {"name": "deliver", "message_property": "summary", "attachments_property": "files"}
FAIL = {"name": "give_up", "message_property": "reason"}


@define_tool
async def write_report(state: Any, text: str) -> str:
    """Write the report file.

    Args:
        text: The report.
    """
    await state.write_file("report.md", text, mime_type="text/markdown")
    return "written"


def call(name: str, **args: Any) -> StubReply:
    return StubReply(tool_calls=[(name, json.dumps(args))])


def researcher(**kw: Any) -> Any:
    fields: dict[str, Any] = {
        "name": "researcher", "type": "dual_ai", "max_session_turns": 6, "expose_as_tool": True,
        "tool_description": "Research a question and deliver a report.",
        "side_a": {"prompt": "lead", "session_status": STATUS, "session_stop": STOP, "session_fail": FAIL},
        "side_b": {"prompt": "critic"},
    }
    fields.update(kw)
    return define_agent(**fields)


def definitions(stub: Any, *, child: Any = None, lead_tools: list[str] | None = None, boss_hooks: list[str] | None = None,
                boss_tools: list[str] | None = None) -> list[Any]:
    return [
        define_agent(name="boss", side_a={"prompt": "boss_prompt"}, hooks=boss_hooks or []),
        define_prompt(name="boss_prompt", prompt=BOSS, tools=boss_tools or ["researcher"]),
        child or researcher(),
        define_prompt(name="lead", prompt=LEAD, tools=lead_tools or ["write_report"]),
        define_prompt(name="critic", prompt=CRITIC),
        write_report,
        stub_model(stub),
    ]


def full_research(stub: Any) -> None:
    """The boss asks; the lead reports progress twice, writes a file and delivers it."""
    stub.queue(
        call("researcher", message="How do tides work?"),
        call("note_progress", note="reading"),
        "First draft: the moon pulls the sea.",
        "Add the sun's part.",
        StubReply(tool_calls=[("note_progress", json.dumps({"note": "writing"})),
                              ("write_report", json.dumps({"text": "# Tides\nMoon and sun."}))]),
        call("deliver", summary="Tides come from the moon and the sun.", files=["report.md"]),
        "The research is done.",
    )


async def parent_tool_message(rt: Any, thread_id: str) -> Any:
    return next(m for m in await rt.store.list_messages(thread_id) if m.role == "tool")


async def test_subagent_status_updates_are_recorded_in_order_on_the_parent(stub, make_runtime):
    full_research(stub)
    rt = await make_runtime(*definitions(stub))
    result = await rt.run("boss", "Research tides.")
    [link] = await rt.store.list_subagents(result.thread_id)
    assert link.status == "complete"
    assert [u["message"] for u in link.result["statusUpdates"]] == ["reading", "writing"]


async def test_subagent_sides_take_turns_in_the_child_thread(stub, make_runtime):
    full_research(stub)
    rt = await make_runtime(*definitions(stub))
    await rt.run("boss", "Research tides.")
    systems = [r["messages"][0]["content"] for r in stub.requests]
    assert systems == [BOSS, LEAD, LEAD, CRITIC, LEAD, LEAD, BOSS]


async def test_subagent_payload_returns_to_the_parent_with_a_readable_attachment(stub, make_runtime):
    full_research(stub)
    rt = await make_runtime(*definitions(stub))
    result = await rt.run("boss", "Research tides.")
    assert result.text == "The research is done."
    tool_msg = await parent_tool_message(rt, result.thread_id)
    assert tool_msg.tool_status == "success"
    body = json.loads(tool_msg.content)
    assert body["message"] == "Tides come from the moon and the sun."
    assert body["outcome"] == "session_stop"
    [ref] = tool_msg.attachments
    assert ref["name"] == "report.md" and ref["mimeType"] == "text/markdown"
    parent = await rt.state(result.thread_id)
    assert await parent.read_file(ref["path"]) == b"# Tides\nMoon and sun."


async def test_parent_and_child_threads_both_persist(stub, make_runtime):
    full_research(stub)
    rt = await make_runtime(*definitions(stub))
    result = await rt.run("boss", "Research tides.")
    [link] = await rt.store.list_subagents(result.thread_id)
    child = await rt.get_thread(link.child_thread_id)
    assert (child.agent, child.parent_id) == ("researcher", result.thread_id)
    child_messages = await rt.store.list_messages(child.id)
    assert child_messages[0].role == "user" and child_messages[0].content == "How do tides work?"
    assert {m.side for m in child_messages if m.role == "assistant"} == {"a", "b"}
    assert [m.role for m in await rt.store.list_messages(result.thread_id)] == ["user", "assistant", "tool", "assistant"]


async def test_failing_subagent_gives_the_parent_an_error_result(stub, make_runtime):
    stub.queue(call("researcher", message="Prove P = NP."), call("give_up", reason="no sources"), "It could not be done.")
    rt = await make_runtime(*definitions(stub))
    result = await rt.run("boss", "Research P vs NP.")
    tool_msg = await parent_tool_message(rt, result.thread_id)
    assert tool_msg.tool_status == "error"
    assert "no sources" in tool_msg.content
    [link] = await rt.store.list_subagents(result.thread_id)
    assert link.status == "failed"
    assert link.result["outcome"] == "session_fail"


async def test_after_subagent_created_fires_on_the_parent(stub, make_runtime):
    seen: list[tuple[str, str, str | None, str]] = []

    @define_hook("after_subagent_created", id="note_child")
    async def note_child(state: Any, child: Any, ctx: Any) -> None:
        seen.append((state.thread_id, child.thread_id, child.parent_id, ctx.source["kind"]))

    full_research(stub)
    rt = await make_runtime(*definitions(stub, boss_hooks=["note_child"]), note_child)
    result = await rt.run("boss", "Research tides.")
    [link] = await rt.store.list_subagents(result.thread_id)
    assert seen == [(result.thread_id, link.child_thread_id, result.thread_id, "agent")]


async def test_parent_state_lists_and_reads_its_subagents(stub, make_runtime):
    full_research(stub)
    rt = await make_runtime(*definitions(stub))
    result = await rt.run("boss", "Research tides.")
    parent = await rt.state(result.thread_id)
    [entry] = await parent.list_subagents()
    assert entry.agent == "researcher" and entry.status == "complete"
    same = await parent.get_subagent(entry.id)
    assert same is not None and same.child_thread_id == entry.child_thread_id
    assert same.result["message"] == "Tides come from the moon and the sun."
    by_thread = await parent.get_subagent(entry.child_thread_id)
    assert by_thread is not None and by_thread.id == entry.id
    child = await rt.state(entry.child_thread_id)
    assert await child.get_subagent(entry.id) is None


async def test_non_primary_agent_stays_callable_as_a_tool(stub, make_runtime):
    full_research(stub)
    rt = await make_runtime(*definitions(stub, child=researcher(primary=False)))
    result = await rt.run("boss", "Research tides.")
    [link] = await rt.store.list_subagents(result.thread_id)
    assert link.status == "complete"


async def test_calling_an_agent_already_in_the_chain_is_refused_as_a_cycle(stub, make_runtime):
    stub.queue(call("researcher", message="Tides?"), call("researcher", message="Again?"),
               call("deliver", summary="done", files=[]), "Finished.")
    rt = await make_runtime(*definitions(stub, lead_tools=["researcher"]))
    result = await rt.run("boss", "Research tides.")
    [link] = await rt.store.list_subagents(result.thread_id)
    child_tool = next(m for m in await rt.store.list_messages(link.child_thread_id) if m.role == "tool")
    assert child_tool.tool_status == "error"
    assert "cycle" in child_tool.content and "boss -> researcher -> researcher" in child_tool.content
    assert await rt.store.list_subagents(link.child_thread_id) == []
    assert link.status == "complete"


async def test_nesting_past_the_depth_limit_is_refused(stub, make_runtime):
    inner = define_agent(name="inner", type="dual_ai", expose_as_tool=True, tool_description="Dig deeper.", side_a={"prompt": "critic", "session_stop": "deliver"},
                         side_b={"prompt": "critic"})
    stub.queue(call("researcher", message="Tides?"), call("inner", message="Deeper?"),
               call("deliver", summary="done", files=[]), "Finished.")
    rt = await make_runtime(*definitions(stub, lead_tools=["inner"]), inner)
    rt.max_subagent_depth = 1
    result = await rt.run("boss", "Research tides.")
    [link] = await rt.store.list_subagents(result.thread_id)
    child_tool = next(m for m in await rt.store.list_messages(link.child_thread_id) if m.role == "tool")
    assert child_tool.tool_status == "error"
    assert "depth limit of 1" in child_tool.content
    assert await rt.store.list_subagents(link.child_thread_id) == []


async def test_nesting_within_the_depth_limit_runs(stub, make_runtime):
    inner = define_agent(name="inner", type="dual_ai", expose_as_tool=True, tool_description="Dig deeper.", side_a={"prompt": "critic", "session_stop": "finish_inner"},
                         side_b={"prompt": "critic"})
    stub.queue(call("researcher", message="Tides?"), call("inner", message="Deeper?"), call("finish_inner"),
               call("deliver", summary="done", files=[]), "Finished.")
    rt = await make_runtime(*definitions(stub, lead_tools=["inner"]), inner)
    rt.max_subagent_depth = 2
    result = await rt.run("boss", "Research tides.")
    [link] = await rt.store.list_subagents(result.thread_id)
    [nested] = await rt.store.list_subagents(link.child_thread_id)
    assert nested.status == "complete"


async def test_an_ai_human_agent_named_as_a_tool_is_a_handoff(stub, make_runtime):
    billing = define_agent(name="billing", side_a={"prompt": "billing_prompt"}, expose_as_tool=True,
                           tool_description="Hand the customer to billing.", primary=False)
    stub.queue(call("billing", message="Refund question"), "Billing here: your refund is on its way.")
    rt = await make_runtime(*definitions(stub, boss_tools=["billing"]), billing,
                            define_prompt(name="billing_prompt", prompt="You handle billing."))
    first = await rt.run("boss", "I want a refund.")
    assert first.outcome == "handoff"
    assert len(stub.requests) == 1
    assert (await rt.get_thread(first.thread_id)).agent == "billing"
    second = await rt.send(first.thread_id, "Where is my money?")
    assert second.text == "Billing here: your refund is on its way."
    assert stub.requests[1]["messages"][0] == {"role": "system", "content": "You handle billing."}


QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart"


@pytest.fixture
async def quickstart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Runtime]:
    """The example project on the offline test model."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "STANDARDAGENTS_MODEL"):
        monkeypatch.delenv(var, raising=False)
    rt = await Runtime.open(QUICKSTART, database_url=f"sqlite:///{tmp_path / 'qs.db'}")
    yield rt
    await rt.aclose()


async def test_example_debate_ends_on_the_offline_model(quickstart):
    result = await quickstart.run("debate", "Tabs or spaces?")
    assert (result.stop_reason, result.outcome, result.stopped_by) == ("complete", "session_stop", "b")


async def test_example_assistant_calls_the_researcher_subagent_on_the_offline_model(quickstart):
    result = await quickstart.run("assistant", "Research the history of tabs and spaces.")
    assert result.stop_reason == "complete"
    [link] = await quickstart.store.list_subagents(result.thread_id)
    assert link.status == "complete" and link.result["outcome"] == "session_stop"
    assert len(link.result["statusUpdates"]) == 1
    [ref] = link.result["attachments"]
    parent = await quickstart.state(result.thread_id)
    assert await parent.read_file(ref["path"]) == await (await quickstart.state(link.child_thread_id)).read_file("notes.md")


async def test_what_a_subagent_spent_is_reported_apart_from_the_parents_own_calls(stub, make_runtime):
    full_research(stub)
    rt = await make_runtime(*definitions(stub))
    result = await rt.run("boss", "Research tides.")
    [link] = await rt.store.list_subagents(result.thread_id)

    async def spent(thread_id: str) -> tuple[int, int]:
        calls = [m.usage for m in await rt.store.list_messages(thread_id) if m.role == "assistant" and m.usage]
        return sum(u.prompt_tokens for u in calls), sum(u.completion_tokens for u in calls)

    own, child = await spent(result.thread_id), await spent(link.child_thread_id)
    assert own[0] > 0 and child[0] > 0
    assert (result.usage["prompt_tokens"], result.usage["completion_tokens"]) == own
    assert (result.subagent_usage["prompt_tokens"], result.subagent_usage["completion_tokens"]) == child
    record = await rt.store.get_execution(result.execution_id)
    assert record is not None and record.state["subagentUsage"] == result.subagent_usage
    assert result.to_dict()["subagentUsage"] == result.subagent_usage


async def test_the_parents_execution_names_the_subagent_thread_its_tool_started(stub, make_runtime):
    from standardagents.engine.steps import load_execution

    full_research(stub)
    rt = await make_runtime(*definitions(stub))
    result = await rt.run("boss", "Research tides.")
    [link] = await rt.store.list_subagents(result.thread_id)
    record = await rt.store.get_execution(result.execution_id)
    assert record is not None
    detail = await load_execution(rt.store, record)
    (call,) = detail["steps"][0]["toolCalls"]
    expected = {"threadId": link.child_thread_id, "agent": "researcher", "status": "complete"}
    assert call["name"] == "researcher" and call["subagent"] == expected
    assert detail["subagents"] == [expected]
