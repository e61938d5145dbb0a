"""``standardagents effects``: see, cancel and run a project's scheduled effects.

Running due effects from the command line suits cron-style deployments that do not keep
a server (and its scheduler) up.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from .exceptions import StandardAgentsError

__all__ = ["effects_app"]

effects_app = typer.Typer(name="effects", help="List, cancel and run scheduled effects.", no_args_is_help=True,
                          add_completion=False, pretty_exceptions_enable=False)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

T = TypeVar("T")

ProjectArg = Annotated[Path, typer.Argument(help="The project folder (the one holding agents/).")]
DbOpt = Annotated[str | None, typer.Option("--database-url", envvar="STANDARDAGENTS_DATABASE_URL",
                                           help="SQLAlchemy URL; default: SQLite under .standardagents/.")]


def _with_runtime(project: Path, database_url: str | None, body: Callable[[Any], Awaitable[T]]) -> T:
    """Open the project's runtime, run ``body`` with it, close it; our errors become one line.

    It does not take over turns of crashed processes: this runtime closes in a moment, and a
    turn it resumed would be cut short again (a server resumes them)."""
    from .engine import Runtime

    async def main() -> T:
        rt = await Runtime.open(project, database_url=database_url, take_over=False)
        try:
            return await body(rt)
        finally:
            await rt.aclose()

    try:
        return asyncio.run(main())
    except StandardAgentsError as exc:
        err.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(1) from None


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@effects_app.command("list")
def list_command(
    project: ProjectArg,
    thread: Annotated[str | None, typer.Option("--thread", help="Only this thread's effects.")] = None,
    status: Annotated[str | None, typer.Option("--status", help="Only effects in this status (pending, running, done, failed, cancelled).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    database_url: DbOpt = None,
) -> None:
    """List scheduled effects, soonest first."""
    effects = _with_runtime(project, database_url, lambda rt: rt.store.list_effects(thread_id=thread, status=status))
    if as_json:
        rows = [{"id": e.id, "name": e.name, "threadId": e.thread_id, "status": e.status, "runAt": e.run_at,
                 "attempts": e.attempts, "lastError": e.last_error, "args": e.args, "result": e.result} for e in effects]
        out.print_json(json.dumps(rows, default=str))
        return
    if not effects:
        out.print("No effects.")
        return
    for e in effects:
        error = f"  last error: {e.last_error}" if e.last_error else ""
        out.print(f"{e.id}  {e.name}  {e.status}  run at {_when(e.run_at)}  attempts {e.attempts}  "
                  f"thread {e.thread_id}{error}", markup=False)


@effects_app.command("cancel")
def cancel_command(
    project: ProjectArg,
    effect_id: Annotated[str, typer.Argument(help="The effect to cancel.")],
    database_url: DbOpt = None,
) -> None:
    """Cancel a pending (or running) effect so it never runs again."""
    cancelled = _with_runtime(project, database_url, lambda rt: rt.store.cancel_effect(effect_id))
    if not cancelled:
        err.print(f"[bold red]error:[/] no pending or running effect {effect_id!r} (list them with `standardagents effects list`)")
        raise typer.Exit(1)
    out.print(f"Cancelled {effect_id}.")


@effects_app.command("run-due")
def run_due_command(
    project: ProjectArg,
    database_url: DbOpt = None,
) -> None:
    """Run every effect that is due now, once, and print how each ended."""
    from .engine.effects import EffectScheduler

    ran = _with_runtime(project, database_url, lambda rt: EffectScheduler(rt).run_due())
    if not ran:
        out.print("No effects are due.")
        return
    for e in ran:
        detail = f" ({e.last_error})" if e.last_error and e.status != "done" else ""
        out.print(f"{e.id} {e.name}: {e.status}{detail}")
