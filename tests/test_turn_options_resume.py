"""A call's own output type and usage limits stay with its turn: through a pause for an
approval (in the same runtime or after a restart on the same database), a resume after a
crash, and a wait in a busy thread's inbox."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from engine_helpers import stub_model
from standardagents import Runtime, define_agent, define_prompt, define_tool
from standardagents.project import build_registry, load_project
from standardagents.store import open_store
from standardagents.testing.openai_stub import StubReply


class Invoice(BaseModel):
    customer: str
    total: float


INVOICE = {"customer": "ACME", "total": 12.5}
INVOICE_SCHEMA = {"type": "object", "title": "Invoice", "required": ["customer", "total"],
                  "properties": {"customer": {"type": "string"}, "total": {"type": "number"}}}
USAGE = {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}


@define_tool(needs_approval=True)
def refund(order: str) -> str:
    """Refund an order (needs a person's approval).

    Args:
        order: The order to refund.
    """
    return f"refunded {order}"


@define_tool
def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: What to look up.
    """
    return f"facts about {topic}"


def _definitions(stub: Any) -> tuple[Any, ...]:
    return (define_agent(name="clerk", side_a={"prompt": "main"}),
            define_prompt(name="main", prompt="You handle refunds.", tools=["refund", "lookup"]),
            refund, lookup, stub_model(stub, stream=False))


async def _open(stub: Any, db: str) -> Runtime:
    return await Runtime.open(build_registry(*_definitions(stub)), store=open_store(db))


def _gated(usage: dict[str, int] | None = None) -> StubReply:
    return StubReply(tool_calls=[("refund", '{"order": "o-1"}')], usage=usage)


@pytest.mark.parametrize("output_type", [Invoice, INVOICE_SCHEMA], ids=["pydantic", "json-schema"])
async def test_a_call_output_type_survives_an_approval_pause_and_a_restart(stub, tmp_path: Path, output_type: Any):
    db = f"sqlite:///{tmp_path / 'typed.db'}"
    # after the approval: an answer missing a field (sent back with its errors), then a valid one
    stub.queue(_gated(), json.dumps({"customer": "ACME"}), json.dumps(INVOICE))
    rt = await _open(stub, db)
    paused = await rt.send((await rt.create_thread("clerk")).id, "refund o-1 and bill ACME", output_type=output_type)
    assert paused.outcome == "approval_required"
    token = paused.payload["approvals"][0]["token"]
    await rt.aclose()
    rt2 = await _open(stub, db)
    try:
        result = await (await rt2.decide(token, True))
    finally:
        await rt2.aclose()
    assert (result.outcome, result.execution_id) == ("response", paused.execution_id)
    # this process made the type, so the value is the caller's own class again
    if output_type is Invoice:
        assert isinstance(result.value, Invoice) and result.value.model_dump() == INVOICE
    else:
        assert result.value == INVOICE
    assert len(stub.requests) == 3
    for request in stub.requests[1:]:
        assert request["response_format"]["json_schema"]["schema"]["required"] == ["customer", "total"]
    assert "customer" in stub.requests[2]["messages"][-1]["content"] or "total" in stub.requests[2]["messages"][-1]["content"]


PROCESS_PROJECT = {
    "agents/agents/clerk.py": "from standardagents import define_agent\n"
                              "clerk = define_agent(name='clerk', side_a={'prompt': 'main'})\n",
    "agents/prompts/main.py": "from standardagents import define_prompt\n"
                              "main = define_prompt(name='main', prompt='You handle refunds.', tools=['refund'])\n",
    "agents/tools/refund.py": "from standardagents import define_tool\n\n\n"
                              "@define_tool(needs_approval=True)\n"
                              "def refund(order: str) -> str:\n"
                              "    '''Refund an order (needs approval).'''\n"
                              "    return f'refunded {order}'\n",
}

PAUSE_SCRIPT = textwrap.dedent('''
    import asyncio, json, sys
    from pydantic import BaseModel
    from standardagents import Runtime
    from standardagents.store import open_store

    class Invoice(BaseModel):
        customer: str
        total: float

    async def main():
        rt = await Runtime.open(sys.argv[1], store=open_store(sys.argv[2]))
        result = await rt.run("clerk", "refund and bill", output_type=Invoice)
        print(json.dumps({"outcome": result.outcome, "token": result.payload["approvals"][0]["token"]}), flush=True)
        await rt.aclose()

    asyncio.run(main())
''')


async def test_a_python_type_from_a_process_that_is_gone_resumes_as_validated_json(tmp_path: Path):
    """A restart in a new process: the caller's class is not there, its JSON Schema is."""
    project = tmp_path / "project"
    for rel, text in PROCESS_PROJECT.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(text)
    db = f"sqlite:///{tmp_path / 'typed.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    done = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", PAUSE_SCRIPT, str(project), db],
                                   capture_output=True, text=True, env=env, timeout=120, check=True)
    paused = json.loads(done.stdout.strip().splitlines()[-1])
    assert paused["outcome"] == "approval_required"
    rt = await Runtime.open(load_project(project), store=open_store(db))
    try:
        result = await (await rt.decide(paused["token"], True))
    finally:
        await rt.aclose()
    assert result.outcome == "response"
    assert isinstance(result.value, dict) and set(result.value) == {"customer", "total"}
    assert isinstance(result.value["customer"], str) and isinstance(result.value["total"], int | float)


async def test_call_usage_limits_are_still_enforced_after_an_approval_resume(stub, make_runtime):
    stub.queue(_gated(USAGE), StubReply(tool_calls=[("lookup", '{"topic": "o-1"}')], usage=USAGE), "All done.")
    rt = await make_runtime(*_definitions(stub))
    paused = await rt.run("clerk", "refund o-1", usage_limits={"requests": 2})
    assert paused.outcome == "approval_required"
    result = await (await rt.decide(paused.payload["approvals"][0]["token"], True))
    # the request made before the pause counts: the third one is refused
    assert result.outcome == "usage_limit"
    assert (result.payload["limit"], result.payload["max"]) == ("requests", 2)
    assert len(stub.requests) == 2
    # and what the turn spent before it paused is still the turn's
    assert result.usage["total_tokens"] == 60


CRASH_PROJECT = {
    "agents/agents/clerk.py": "from standardagents import define_agent\n"
                              "clerk = define_agent(name='clerk', side_a={'prompt': 'main'})\n",
    "agents/prompts/main.py": "from standardagents import define_prompt\n"
                              "main = define_prompt(name='main', prompt='You bill.', tools=['charge'])\n",
    "agents/tools/charge.py": "import asyncio\nfrom standardagents import define_tool\n\n\n"
                              "@define_tool\n"
                              "async def charge(order: str) -> str:\n"
                              "    '''Charge an order.'''\n"
                              "    print('STARTED', flush=True)\n"
                              "    await asyncio.sleep(3600)\n"
                              "    return 'charged'\n",
}

CRASH_SCRIPT = textwrap.dedent('''
    import asyncio, json, sys
    from standardagents import Runtime
    from standardagents.store import open_store

    async def main():
        rt = await Runtime.open(sys.argv[1], store=open_store(sys.argv[2]))
        thread = await rt.create_thread("clerk")
        print(thread.id, flush=True)
        await rt.send(thread.id, "bill ACME", output_type=json.loads(sys.argv[3]), usage_limits={"requests": 5})

    asyncio.run(main())
''')


async def test_a_turn_resumed_after_its_process_died_keeps_the_call_output_type(tmp_path: Path):
    project = tmp_path / "project"
    for rel, text in CRASH_PROJECT.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(text)
    db = f"sqlite:///{tmp_path / 'crash.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}

    def run_and_kill() -> str:
        proc = subprocess.Popen([sys.executable, "-c", CRASH_SCRIPT, str(project), db, json.dumps(INVOICE_SCHEMA)],
                                stdout=subprocess.PIPE, text=True, env=env)
        try:
            assert proc.stdout is not None
            thread_id = proc.stdout.readline().strip()
            assert proc.stdout.readline().strip() == "STARTED"
        finally:
            proc.kill()
            proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()
        return thread_id

    thread_id = await asyncio.to_thread(run_and_kill)
    rt = await Runtime.open(load_project(project), store=open_store(db))
    try:
        await rt.drain()
        (record,) = await rt.store.list_executions(thread_id=thread_id)
        messages = await rt.store.list_messages(thread_id)
    finally:
        await rt.aclose()
    assert record.status == "complete"
    assert set(record.state["value"]) == {"customer", "total"}
    assert messages[-1].metadata["value"] == record.state["value"]
    assert record.state["options"]["usageLimits"] == {"requests": 5}


def _busy_definitions(stub: Any, started: asyncio.Event, release: asyncio.Event) -> tuple[Any, ...]:
    @define_tool
    async def slow_job() -> str:
        """Takes a while."""
        started.set()
        await release.wait()
        return "finished"

    return (define_agent(name="clerk", side_a={"prompt": "main"}),
            define_prompt(name="main", prompt="You bill.", tools=["slow_job"]), slow_job, stub_model(stub, stream=False))


async def test_a_message_queued_to_a_busy_thread_gets_its_own_typed_value(stub, make_runtime):
    started, release = asyncio.Event(), asyncio.Event()
    stub.queue(StubReply(tool_calls=[("slow_job", "{}")]), "The job finished.", json.dumps(INVOICE))
    rt = await make_runtime(*_busy_definitions(stub, started, release))
    thread = await rt.create_thread("clerk")
    first = await rt.start(thread.id, "run the job")
    await started.wait()
    with rt.subscribe(thread.id) as events:
        second = await rt.start(thread.id, "now bill ACME", output_type=Invoice, usage_limits={"requests": 3})
        assert (await events.get(timeout=10)).type == "message_queued"
    release.set()
    assert (await first).value is None
    result = await second
    assert isinstance(result.value, Invoice) and result.value.model_dump() == INVOICE
    assert "response_format" not in stub.requests[1] and "response_format" in stub.requests[2]


async def test_a_queued_message_keeps_its_output_type_when_another_runtime_delivers_it(stub, tmp_path: Path):
    """The runtime that queued it closes before its turn; the next one on the database sends
    it again, with the output type and limits it was sent with."""
    db = f"sqlite:///{tmp_path / 'inbox.db'}"
    started, release = asyncio.Event(), asyncio.Event()
    stub.queue(StubReply(tool_calls=[("slow_job", "{}")]), json.dumps(INVOICE))
    rt = await Runtime.open(build_registry(*_busy_definitions(stub, started, release)), store=open_store(db))
    thread = await rt.create_thread("clerk")
    await rt.start(thread.id, "run the job")
    await started.wait()
    queued = await rt.start(thread.id, "now bill ACME", output_type=INVOICE_SCHEMA, usage_limits={"requests": 3})
    await rt.aclose()
    assert queued.cancelled()
    rt2 = await Runtime.open(build_registry(*_busy_definitions(stub, asyncio.Event(), asyncio.Event())),
                             store=open_store(db))
    try:
        await rt2.drain()
        records = await rt2.store.list_executions(thread_id=thread.id)
    finally:
        await rt2.aclose()
    delivered = next(r for r in records if r.status == "complete")
    assert delivered.state["value"] == INVOICE
    assert delivered.state["options"]["usageLimits"] == {"requests": 3}
    assert stub.requests[-1]["response_format"]["json_schema"]["schema"]["required"] == ["customer", "total"]


async def test_a_call_thread_limit_counts_earlier_turns_and_the_steps_before_a_pause(stub, tmp_path: Path):
    db = f"sqlite:///{tmp_path / 'limits.db'}"
    stub.queue(StubReply(text="Hello.", usage=USAGE), _gated(USAGE), "Refunded.")
    rt = await _open(stub, db)
    first = await rt.run("clerk", "hi")
    assert first.outcome == "response"
    # 20 output tokens in the first turn, 20 more before the pause: the cap of 40 is reached
    paused = await rt.send(first.thread_id, "refund o-1", usage_limits={"thread_output_tokens": 40})
    assert paused.outcome == "approval_required"
    token = paused.payload["approvals"][0]["token"]
    await rt.aclose()
    rt2 = await _open(stub, db)
    try:
        result = await (await rt2.decide(token, True))
    finally:
        await rt2.aclose()
    assert result.outcome == "usage_limit"
    assert (result.payload["limit"], result.payload["used"]) == ("thread_output_tokens", 40)
    assert len(stub.requests) == 2
