"""Scheduled effects: defined in agents/effects/, persisted by a thread, run once by any
number of schedulers (also across a restart), retried with exponential backoff."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from standardagents import Runtime, define_agent, define_effect, define_prompt
from standardagents.effects_cli import effects_app
from standardagents.engine.effects import EffectScheduler, backoff_ms
from standardagents.exceptions import NotFoundError
from standardagents.project import build_registry, load_project
from standardagents.records import now_ms
from standardagents.store import open_store

calls: list[tuple[str, dict[str, Any]]] = []
failures_left: dict[str, int] = {}


async def remember(state: Any, args: dict[str, Any]) -> dict[str, Any]:
    calls.append((state.thread_id, dict(args)))
    await state.set_env("remembered", args.get("note"))
    return {"remembered": args.get("note")}


async def flaky(state: Any, args: dict[str, Any]) -> str:
    calls.append((state.thread_id, dict(args)))
    left = failures_left.get(state.thread_id, 0)
    if left:
        failures_left[state.thread_id] = left - 1
        raise ConnectionError("mail server unreachable")
    return "sent"


def definitions() -> list[Any]:
    calls.clear()
    failures_left.clear()
    return [define_agent(name="helper", side_a={"prompt": "main"}), define_prompt(name="main", prompt="You help."),
            define_effect("remember", "Remember a note.", {"type": "object", "properties": {"note": {"type": "string"}}}, remember),
            define_effect(name="send_mail", description="Send a mail.", handler=flaky, max_attempts=3)]


async def new_thread(rt: Runtime) -> Any:
    return await rt.state((await rt.create_thread("helper")).id)


async def test_effects_load_from_the_project_folder(tmp_path: Path):
    effects = tmp_path / "agents" / "effects"
    effects.mkdir(parents=True)
    (effects / "remember.py").write_text(textwrap.dedent('''
        from standardagents import define_effect

        async def handler(state, args):
            return args

        remember = define_effect("remember", "Remember a note.", {"type": "object"}, handler)
    '''))
    (effects / "packed.py").write_text(textwrap.dedent('''
        from standardagents import define_effect

        def handler(state, args):
            return "ok"

        notify = define_effect(("notify", "Notify someone.", {"type": "object"}, handler))
    '''))
    registry = load_project(tmp_path)
    assert registry.names("effects") == ["notify", "remember"]
    assert registry.get("effects", "notify").description == "Notify someone."


async def test_scheduling_persists_a_pending_effect(make_runtime):
    rt = await make_runtime(*definitions())
    state = await new_thread(rt)
    before = now_ms()
    effect_id = await state.schedule_effect("remember", {"note": "milk"}, delay=60)
    [effect] = await rt.store.list_effects(thread_id=state.thread_id)
    assert (effect.id, effect.name, effect.status, effect.args) == (effect_id, "remember", "pending", {"note": "milk"})
    assert before + 60_000 <= effect.run_at <= now_ms() + 60_000


async def test_an_effect_is_not_run_before_it_is_due(make_runtime):
    rt = await make_runtime(*definitions())
    state = await new_thread(rt)
    await state.schedule_effect("remember", {"note": "milk"}, delay=60)
    assert await EffectScheduler(rt).run_due() == []
    assert calls == []


async def test_scheduling_an_unknown_effect_is_refused(make_runtime):
    rt = await make_runtime(*definitions())
    state = await new_thread(rt)
    with pytest.raises(NotFoundError, match="unknown effect 'nope'"):
        await state.schedule_effect("nope")


async def test_a_due_effect_runs_with_the_threads_state_and_records_its_result(make_runtime):
    rt = await make_runtime(*definitions())
    state = await new_thread(rt)
    effect_id = await state.schedule_effect("remember", {"note": "milk"})
    [ran] = await EffectScheduler(rt).run_due()
    assert (ran.id, ran.status, ran.result, ran.attempts) == (effect_id, "done", {"remembered": "milk"}, 1)
    assert calls == [(state.thread_id, {"note": "milk"})]
    assert await state.get_env("remembered") == "milk"


async def test_a_cancelled_effect_never_runs(make_runtime):
    rt = await make_runtime(*definitions())
    state = await new_thread(rt)
    effect_id = await state.schedule_effect("remember", {"note": "milk"})
    assert await rt.store.cancel_effect(effect_id)
    assert await EffectScheduler(rt).run_due() == []
    assert calls == []


async def test_a_failing_effect_is_retried_with_exponential_backoff_until_max_attempts(make_runtime):
    rt = await make_runtime(*definitions())
    state = await new_thread(rt)
    failures_left[state.thread_id] = 99
    effect_id = await state.schedule_effect("send_mail", {})
    scheduler = EffectScheduler(rt, base_backoff=1.0)
    t0 = now_ms()
    [first] = await scheduler.run_due(t0)
    assert (first.status, first.attempts, first.run_at) == ("pending", 1, t0 + backoff_ms(1, 1.0))
    assert first.last_error == "ConnectionError: mail server unreachable"
    assert await scheduler.run_due(first.run_at - 1) == []
    [second] = await scheduler.run_due(first.run_at)
    assert (second.status, second.attempts, second.run_at) == ("pending", 2, first.run_at + backoff_ms(2, 1.0))
    assert second.run_at - first.run_at == 2 * (first.run_at - t0)
    [third] = await scheduler.run_due(second.run_at)
    assert (third.id, third.status, third.attempts) == (effect_id, "failed", 3)
    assert await scheduler.run_due(second.run_at + 10**9) == []
    assert len(calls) == 3


async def test_an_effect_that_fails_once_succeeds_on_its_retry(make_runtime):
    rt = await make_runtime(*definitions())
    state = await new_thread(rt)
    failures_left[state.thread_id] = 1
    await state.schedule_effect("send_mail", {})
    scheduler = EffectScheduler(rt, base_backoff=0.5)
    [first] = await scheduler.run_due()
    [second] = await scheduler.run_due(first.run_at)
    assert (second.status, second.result, second.attempts) == ("done", "sent", 2)


async def test_a_scheduled_effect_runs_exactly_once_after_a_restart(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'effects.db'}"
    rt = await Runtime.open(build_registry(*definitions()), store=open_store(url))
    state = await new_thread(rt)
    effect_id = await state.schedule_effect("remember", {"note": "after restart"})
    await rt.aclose()

    rt2 = await Runtime.open(build_registry(*definitions()), store=open_store(url))
    try:
        first, second = EffectScheduler(rt2), EffectScheduler(rt2)
        assert [e.id for e in await first.run_due()] == [effect_id]
        assert await first.run_due() == []
        assert await second.run_due() == []
        assert calls == [(state.thread_id, {"note": "after restart"})]
        stored = await rt2.store.get_effect(effect_id)
        assert stored is not None and stored.status == "done"
    finally:
        await rt2.aclose()


async def test_two_schedulers_on_one_database_run_each_effect_once(backend):
    runtimes = [await Runtime.open(build_registry(*definitions()), store=backend.new_store()) for _ in range(2)]
    try:
        state = await new_thread(runtimes[0])
        ids = {await state.schedule_effect("remember", {"note": f"n{i}"}) for i in range(12)}
        schedulers = [EffectScheduler(rt, batch=3) for rt in runtimes]

        async def drain(scheduler: EffectScheduler) -> list[str]:
            ran: list[str] = []
            while batch := await scheduler.run_due():
                ran += [e.id for e in batch]
            return ran

        a, b = await asyncio.gather(*(drain(s) for s in schedulers))
        assert sorted(a + b) == sorted(ids)
        assert len(calls) == 12
        assert sorted(args["note"] for _, args in calls) == sorted(f"n{i}" for i in range(12))
    finally:
        for rt in runtimes:
            await rt.aclose()


slow_gate: dict[str, asyncio.Event] = {}


async def slow(state: Any, args: dict[str, Any]) -> str:
    calls.append((state.thread_id, dict(args)))
    if slow_gate["started"].is_set():
        return "a second run"  # (never waits: a test that catches a double run must not hang)
    slow_gate["started"].set()
    await slow_gate["release"].wait()
    return "finally"


async def test_a_slow_effect_outliving_its_lease_is_not_taken_over_by_another_scheduler(backend):
    defs = [*definitions(), define_effect(name="slow", description="Takes its time.", handler=slow)]
    slow_gate.update(started=asyncio.Event(), release=asyncio.Event())
    runtimes = [await Runtime.open(build_registry(*defs), store=backend.new_store()) for _ in range(2)]
    try:
        state = await new_thread(runtimes[0])
        effect_id = await state.schedule_effect("slow", {})
        lease_ms = 1000
        first, second = (EffectScheduler(rt, lease_ms=lease_ms) for rt in runtimes)
        running = asyncio.get_running_loop().create_task(first.run_due())
        await slow_gate["started"].wait()
        claimed = await runtimes[1].store.get_effect(effect_id)
        assert claimed is not None and claimed.status == "running"
        # let the clock pass the end of the lease the effect was first claimed under
        await asyncio.sleep((claimed.claimed_until - now_ms()) / 1000 + 0.1)
        assert now_ms() > claimed.claimed_until
        assert await second.run_due() == []  # the lease was renewed: still the first's
        slow_gate["release"].set()
        [ran] = await running
        assert (ran.id, ran.status, ran.result, ran.attempts) == (effect_id, "done", "finally", 1)
        assert len(calls) == 1
    finally:
        slow_gate["release"].set()
        for rt in runtimes:
            await rt.aclose()


async def test_a_retry_is_due_a_backoff_after_the_effects_own_failure(make_runtime):
    failed_at: list[int] = []

    async def fails(state: Any, args: dict[str, Any]) -> str:
        failed_at.append(now_ms())
        raise ConnectionError("unreachable")

    async def takes_a_while(state: Any, args: dict[str, Any]) -> str:
        await asyncio.sleep(0.2)  # a slow effect earlier in the same pass
        return "ok"

    rt = await make_runtime(*definitions(), define_effect(name="fails", description="Fails.", handler=fails),
                            define_effect(name="takes_a_while", description="Slow.", handler=takes_a_while))
    state = await new_thread(rt)
    await state.schedule_effect("takes_a_while", {})
    failing = await state.schedule_effect("fails", {}, delay=0.001)
    await asyncio.sleep(0.01)  # both due
    ran = {e.id: e for e in await EffectScheduler(rt, base_backoff=1.0).run_due()}
    assert ran[failing].status == "pending"
    assert ran[failing].run_at >= failed_at[0] + backoff_ms(1, 1.0)


async def test_stopping_the_scheduler_passes_the_callers_cancellation_on(make_runtime):
    rt = await make_runtime(*definitions())
    scheduler = EffectScheduler(rt, interval=60)
    scheduler.start()
    await asyncio.sleep(0)
    caller = asyncio.get_running_loop().create_task(scheduler.stop())
    await asyncio.sleep(0)  # the caller now waits for the scheduler's task to end
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert caller.cancelled()


def write_project(root: Path) -> None:
    (root / "agents" / "agents").mkdir(parents=True)
    (root / "agents" / "prompts").mkdir()
    (root / "agents" / "effects").mkdir()
    (root / "agents" / "agents" / "helper.py").write_text(
        'from standardagents import define_agent\nhelper = define_agent(name="helper", side_a={"prompt": "main"})\n')
    (root / "agents" / "prompts" / "main.py").write_text(
        'from standardagents import define_prompt\nmain = define_prompt(name="main", prompt="You help.")\n')
    (root / "agents" / "effects" / "ping.py").write_text(
        'from standardagents import define_effect\n\n'
        'async def handler(state, args):\n    return "pong " + args["to"]\n\n'
        'ping = define_effect("ping", "Ping someone.", {"type": "object"}, handler)\n')


async def test_effects_cli_lists_cancels_and_runs_due_effects(tmp_path: Path):
    project = tmp_path / "proj"
    write_project(project)
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    rt = await Runtime.open(project, database_url=url)
    try:
        state = await new_thread(rt)
        keep = await state.schedule_effect("ping", {"to": "ann"})
        drop = await state.schedule_effect("ping", {"to": "bob"})
    finally:
        await rt.aclose()
    runner = CliRunner()
    db = ["--database-url", url]

    listed = await asyncio.to_thread(runner.invoke, effects_app, ["list", str(project), "--thread", state.thread_id, *db])
    assert listed.exit_code == 0, listed.output
    assert keep in listed.output and drop in listed.output and "pending" in listed.output

    other = await asyncio.to_thread(runner.invoke, effects_app, ["list", str(project), "--thread", "thr_none", *db])
    assert "No effects." in other.output

    cancelled = await asyncio.to_thread(runner.invoke, effects_app, ["cancel", str(project), drop, *db])
    assert cancelled.exit_code == 0, cancelled.output
    again = await asyncio.to_thread(runner.invoke, effects_app, ["cancel", str(project), drop, *db])
    assert again.exit_code == 1

    ran = await asyncio.to_thread(runner.invoke, effects_app, ["run-due", str(project), *db])
    assert ran.exit_code == 0, ran.output
    assert f"{keep} ping: done" in ran.output and drop not in ran.output

    rt = await Runtime.open(project, database_url=url)
    try:
        statuses = {e.id: (e.status, e.result) for e in await rt.store.list_effects(thread_id=state.thread_id)}
    finally:
        await rt.aclose()
    assert statuses == {keep: ("done", "pong ann"), drop: ("cancelled", None)}
