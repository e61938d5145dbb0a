"""Parent hooks: a dual_ai child's required hooks run on each direct parent exactly while an
enabled parent prompt exposes that child, against the parent's state, in the child's namespace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine_helpers import stub_model
from standardagents import Runtime, define_agent, define_hook, define_prompt
from standardagents.project import build_registry
from standardagents.store import open_store
from standardagents.testing.openai_stub import StubReply

seen: list[tuple[str, str, dict[str, Any]]] = []


def recorder(hook_id: str, label: str) -> Any:
    @define_hook("after_create_message", id=hook_id)
    async def record(state: Any, message: Any, ctx: Any) -> None:
        if message.role == "assistant":
            seen.append((label, state.thread_id, dict(ctx.source)))

    return record


def child(stage: str = "after_parent", hook: str = "mark_parent") -> Any:
    return define_agent(name="researcher", type="dual_ai", expose_as_tool=True, tool_description="Research a question.",
                        side_a={"prompt": "lead", "session_stop": "deliver"}, side_b={"prompt": "lead"},
                        parent_hooks=[{"hook": hook, "reason": "Marks each parent reply.", "stage": stage}])


def setup(stub: Any, *, boss_tools: list[Any], boss_hooks: list[str] | None = None, extra: tuple[Any, ...] = ()) -> list[Any]:
    seen.clear()
    return [define_agent(name="boss", side_a={"prompt": "boss_prompt"}, hooks=boss_hooks or []),
            define_prompt(name="boss_prompt", prompt="You lead.", tools=boss_tools),
            define_prompt(name="lead", prompt="You research."), recorder("mark_parent", "child"),
            stub_model(stub), *extra]


CALL_RESEARCHER = StubReply(tool_calls=[("researcher", '{"message": "look"}')])
DELIVER = StubReply(tool_calls=[("deliver", "{}")])
CHILD_SOURCE = {"kind": "child", "relationshipName": "researcher", "agentName": "researcher"}


async def test_parent_hook_runs_on_a_parent_whose_prompt_exposes_the_child(stub, make_runtime):
    rt = await make_runtime(*setup(stub, boss_tools=["researcher"]), child())
    result = await rt.run("boss", "hello")
    assert seen == [("child", result.thread_id, CHILD_SOURCE)]


async def test_a_prompt_without_the_child_gets_no_parent_hooks(stub, make_runtime):
    rt = await make_runtime(*setup(stub, boss_tools=[]), child())
    await rt.run("boss", "hello")
    assert seen == []


async def test_a_disabled_child_tool_config_gets_no_parent_hooks(stub, make_runtime):
    rt = await make_runtime(*setup(stub, boss_tools=[{"name": "researcher", "enabled": False}]), child())
    await rt.run("boss", "hello")
    assert seen == []


async def test_an_enabled_child_tool_config_activates_the_parent_hooks(stub, make_runtime):
    rt = await make_runtime(*setup(stub, boss_tools=[{"name": "researcher", "enabled": True}]), child())
    result = await rt.run("boss", "hello")
    assert seen == [("child", result.thread_id, CHILD_SOURCE)]


async def test_parent_hooks_run_before_or_after_the_parents_own_by_stage(stub, make_runtime):
    early = define_agent(name="scout", type="dual_ai", expose_as_tool=True, tool_description="Scout ahead.",
                         side_a={"prompt": "lead"}, side_b={"prompt": "lead"},
                         parent_hooks=[{"hook": "mark_early", "reason": "Runs first.", "stage": "before_parent"}])
    defs = setup(stub, boss_tools=["researcher", "scout"], boss_hooks=["mark_own"],
                 extra=(early, recorder("mark_early", "before"), recorder("mark_own", "own")))
    rt = await make_runtime(*defs, child(stage="after_parent"))
    await rt.run("boss", "hello")
    assert [label for label, _, _ in seen] == ["before", "own", "child"]
    assert [src["kind"] for _, _, src in seen] == ["child", "agent", "child"]


async def test_parent_hooks_do_not_run_in_the_child_thread(stub, make_runtime):
    stub.queue(CALL_RESEARCHER, DELIVER, "done")
    rt = await make_runtime(*setup(stub, boss_tools=["researcher"]), child())
    result = await rt.run("boss", "hello")
    [link] = await rt.store.list_subagents(result.thread_id)
    assert {thread for _, thread, _ in seen} == {result.thread_id}
    assert link.status == "complete"


async def test_parent_hook_is_resolved_in_the_childs_package_namespace(stub, tmp_path: Path):
    seen.clear()
    registry = build_registry(define_agent(name="boss", side_a={"prompt": "boss_prompt"}),
                              define_prompt(name="boss_prompt", prompt="You lead."),
                              recorder("mark_parent", "global twin"), stub_model(stub))
    registry.add("prompts", "boss_prompt", define_prompt(name="boss_prompt", prompt="You lead.", tools=["researcher"]))
    registry.add("agents", "researcher", child(), package="research_pkg", entry_point=True)
    registry.add("prompts", "lead", define_prompt(name="lead", prompt="You research."), package="research_pkg")
    registry.add("hooks", "mark_parent", recorder("mark_parent", "packaged"), package="research_pkg")
    rt = await Runtime.open(registry, store=open_store(f"sqlite:///{tmp_path / 'ns.db'}"))
    try:
        result = await rt.run("boss", "hello")
    finally:
        await rt.aclose()
    [(label, thread_id, source)] = seen
    assert (label, thread_id) == ("packaged", result.thread_id)
    assert source["kind"] == "child" and source["relationshipName"] == "researcher"
    assert source["package"]["packageId"] == "research_pkg"

