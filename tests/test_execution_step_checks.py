"""Hooks and guardrails in the step records: each model step lists the hooks that ran for it
(name, event, duration, outcome) and the guardrails that vetted it (tripped or not), stored in
the step's own record, served by the executions API and shown by ``threads show``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from engine_helpers import stub_model
from server_fixtures import write_project
from standardagents import Runtime, define_agent, define_hook, define_prompt, define_tool
from standardagents.cli import app
from standardagents.engine.steps import load_execution
from standardagents.testing.openai_stub import OpenAIStub, StubReply


@define_tool(guardrail=True)
def no_secrets(text: str) -> dict[str, Any]:
    """Trip on anything that looks like a secret."""
    return {"tripwire": "password" in text.lower(), "info": None}


def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


def _hooks() -> list[Any]:
    def sharpen(state: Any, system: str, ctx: Any) -> str:
        return system + " Be exact."

    def keep(state: Any, result: Any, call: Any, ctx: Any) -> None:
        return None

    def broken(state: Any, message: Any, ctx: Any) -> None:
        raise RuntimeError("the audit log is down")

    return [define_hook(hook="after_system_message", id="sharpen", execute=sharpen),
            define_hook(hook="after_tool_call_success", id="keep_result", execute=keep),
            define_hook(hook="after_create_message", id="audit", execute=broken)]


async def _turn(make_runtime: Any, stub: OpenAIStub, *replies: Any) -> dict[str, Any]:
    stub.queue(*replies)
    rt = await make_runtime(
        define_agent(name="calc", side_a={"prompt": "p", "stop_on_response": True}, input_guardrails=["no_secrets"],
                     output_guardrails=["no_secrets"]),
        define_prompt(name="p", prompt="You add.", tools=["add"], hooks=["sharpen", "keep_result", "audit"]),
        define_tool(add), no_secrets, *_hooks(), stub_model(stub, stream=False))
    result = await rt.run("calc", "add 2 and 40")
    record = await rt.store.get_execution(result.execution_id)
    assert record is not None
    return await load_execution(rt.store, record)


def _names(entries: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(e["name"], e["event"], e["outcome"]) for e in entries]


async def test_each_step_lists_the_hooks_and_guardrails_that_ran_for_it(make_runtime: Any, stub: OpenAIStub) -> None:
    detail = await _turn(make_runtime, stub, StubReply(tool_calls=[("add", '{"a": 2, "b": 40}')]), "It is 42.")
    first, second = detail["steps"]
    assert stub.requests[0]["messages"][0]["content"] == "You add. Be exact."
    # the first step: the audit hook failed on the user's message stored before it (step 0) and on
    # the messages stored in it, its prompt hook changed the system prompt, its tool's hook kept
    # the result (that hook ran after the step's reply was stored: it comes back to this step)
    assert _names(first["hooks"]) == [("audit", "after_create_message", "error"),
                                      ("sharpen", "after_system_message", "changed"),
                                      ("audit", "after_create_message", "error"),
                                      ("keep_result", "after_tool_call_success", "ok"),
                                      ("audit", "after_create_message", "error")]
    assert [e["step"] for e in first["hooks"]] == [0, 1, 1, 1, 1]
    assert all(e["durationMs"] >= 0 for e in first["hooks"])
    assert all(e["error"] == "RuntimeError: the audit log is down" for e in first["hooks"] if e["name"] == "audit")
    # the answer's own step: the prompt hook again (hooks after the turn's last reply is stored
    # are not recorded: that reply's commit is the turn's last write)
    assert _names(second["hooks"]) == [("sharpen", "after_system_message", "changed")]
    # the input guardrail vetted the user's message before the first step; the output one the answer
    assert first["guardrails"] == [{"name": "no_secrets", "kind": "input", "tripped": False, "step": 0}]
    assert second["guardrails"] == [{"name": "no_secrets", "kind": "output", "tripped": False, "step": 2}]
    assert detail["checks"] == {"hooks": [], "guardrails": []}


async def test_a_tripped_output_guardrail_is_on_the_step_it_stopped(make_runtime: Any, stub: OpenAIStub) -> None:
    detail = await _turn(make_runtime, stub, "the password is hunter2")
    (step,) = detail["steps"]
    assert detail["outcome"] == "guardrail" and step["guardrail"]["guardrail"] == "no_secrets"
    assert {"name": "no_secrets", "kind": "output", "tripped": True, "step": step["step"]} in step["guardrails"]
    assert ("sharpen", "after_system_message", "changed") in _names(step["hooks"])
    assert step["model"] == "default"


async def test_an_input_guardrail_that_stops_the_turn_is_on_the_turn(make_runtime: Any, stub: OpenAIStub) -> None:
    rt = await make_runtime(define_agent(name="calc", side_a={"prompt": "p"}, input_guardrails=["no_secrets"]),
                            define_prompt(name="p", prompt="x"), no_secrets, stub_model(stub))
    result = await rt.run("calc", "my password is hunter2")
    assert result.outcome == "guardrail" and stub.requests == []
    record = await rt.store.get_execution(result.execution_id)
    assert record is not None
    detail = await load_execution(rt.store, record)
    assert detail["steps"] == []
    assert detail["checks"] == {"hooks": [], "guardrails": [{"name": "no_secrets", "kind": "input", "tripped": True,
                                                             "step": 0}]}


async def test_a_step_without_hooks_or_guardrails_records_none(make_runtime: Any, stub: OpenAIStub) -> None:
    rt = await make_runtime(define_agent(name="plain", side_a={"prompt": "p", "stop_on_response": True}),
                            define_prompt(name="p", prompt="x"), stub_model(stub))
    result = await rt.run("plain", "hi")
    (reply,) = [m for m in await rt.store.list_messages(result.thread_id) if m.role == "assistant"]
    assert "hooks" not in reply.metadata["call"] and "guardrails" not in reply.metadata["call"]
    record = await rt.store.get_execution(result.execution_id)
    assert record is not None and "checks" not in record.state
    (step,) = (await load_execution(rt.store, record))["steps"]
    assert step["hooks"] == [] and step["guardrails"] == []
    assert json.dumps(step)  # plain JSON


def test_threads_show_lists_the_hooks_and_guardrails_under_each_step(tmp_path: Path, stub: OpenAIStub) -> None:
    project = write_project(tmp_path / "project", {
        "agents/models/default.py": f"""
            from standardagents import define_model
            default = define_model(name="default", provider="openai", model="stub-model",
                                   base_url="{stub.base_url}", max_retries=0, stream=False)
        """,
        "agents/agents/helper.py": """
            from standardagents import define_agent
            helper = define_agent(name="helper", side_a={"prompt": "helper_prompt", "stop_on_response": True},
                                  output_guardrails=["no_secrets"])
        """,
        "agents/prompts/helper_prompt.py": """
            from standardagents import define_prompt
            helper_prompt = define_prompt(name="helper_prompt", prompt="You add.", hooks=["sharpen"])
        """,
        "agents/hooks/sharpen.py": """
            from standardagents import define_hook

            @define_hook("after_system_message", id="sharpen")
            def sharpen(state, system):
                return system + " Be exact."
        """,
        "agents/tools/no_secrets.py": """
            from standardagents import define_tool

            @define_tool(guardrail=True)
            def no_secrets(text: str) -> dict:
                '''Trip on a password.'''
                return {"tripwire": "password" in text.lower()}
        """,
    })
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    stub.queue("42")

    async def turn() -> str:
        rt = await Runtime.open(project, database_url=url)
        try:
            return (await rt.run("helper", "2+40?")).thread_id
        finally:
            await rt.aclose()

    tid = asyncio.run(turn())
    shown = CliRunner().invoke(app, ["threads", "show", tid, "--project", str(project), "--database-url", url],
                               env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "hook sharpen (after_system_message)  changed" in shown.output
    assert "guardrail no_secrets (output)  passed" in shown.output
