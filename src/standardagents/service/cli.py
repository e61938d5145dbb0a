"""``standardagents schedules``: list, add, pause, resume and delete a project's schedules
from the command line (the server runs them; this only changes what the store says)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from ..exceptions import StandardAgentsError

__all__ = ["schedules_app"]

schedules_app = typer.Typer(name="schedules", help="List, add, pause, resume and delete schedules.",
                            no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

T = TypeVar("T")

ProjectArg = Annotated[Path, typer.Option("--project", "-p", help="The project folder (its database is used).")]
DbOpt = Annotated[str | None, typer.Option("--database-url", envvar="STANDARDAGENTS_DATABASE_URL",
                                           help="SQLAlchemy URL; default: SQLite under .standardagents/.")]
IdArg = Annotated[str, typer.Argument(help="The schedule's id (or a project schedule's name).")]


def _with_runtime(project: Path, database_url: str | None, body: Callable[[Any], Awaitable[T]]) -> T:
    """Open the project's runtime (storing its defined schedules), run ``body``, close it."""
    from ..engine import Runtime
    from .scheduler import sync_defined

    async def main() -> T:
        rt = await Runtime.open(project, database_url=database_url, take_over=False)
        try:
            await sync_defined(rt)
            return await body(rt)
        finally:
            await rt.aclose()

    try:
        return asyncio.run(main())
    except StandardAgentsError as exc:
        err.print(f"[bold red]error:[/] {exc}", markup=True)
        raise typer.Exit(1) from None


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


async def _find(rt: Any, schedule_id: str) -> Any:
    from ..store import serviceops as ops

    record = await ops.run_op(rt.store, ops.get_schedule, schedule_id, write=False)
    if record is None:
        raise StandardAgentsError(f"no schedule {schedule_id!r} (list them with `standardagents schedules list`)")
    return record


@schedules_app.command("list")
def list_command(project: ProjectArg = Path("."), as_json: Annotated[bool, typer.Option("--json")] = False,
                 database_url: DbOpt = None) -> None:
    """List every schedule: when it runs, its next run, and whether it is paused."""
    from ..store import serviceops as ops

    records = _with_runtime(project, database_url, lambda rt: ops.run_op(rt.store, ops.list_schedules, None,
                                                                          write=False))
    if as_json:
        out.print_json(json.dumps([r.to_dict() for r in records]))
        return
    if not records:
        out.print("No schedules.")
        return
    for r in records:
        timing = f"cron '{r.cron}' ({r.timezone})" if r.cron else f"every {r.interval_s} s"
        state = "paused" if r.paused else f"next {_when(r.next_run)}"
        out.print(f"{r.id}  {r.name or '-'}  agent {r.agent}  {timing}  {state}", markup=False)


@schedules_app.command("add")
def add_command(
    agent: Annotated[str, typer.Argument(help="The agent each run talks to.")],
    message: Annotated[str, typer.Argument(help="The message each run sends.")],
    cron: Annotated[str | None, typer.Option("--cron", help="A cron expression (five fields).")] = None,
    interval: Annotated[int | None, typer.Option("--interval", help="Seconds between runs.")] = None,
    timezone: Annotated[str, typer.Option("--timezone", help="The cron expression's time zone.")] = "UTC",
    overlap: Annotated[str, typer.Option("--overlap", help="skip, queue or cancel.")] = "skip",
    project: ProjectArg = Path("."),
    database_url: DbOpt = None,
) -> None:
    """Add a schedule (a server running the project runs it)."""
    from .scheduler import create_schedule

    record = _with_runtime(project, database_url, lambda rt: create_schedule(
        rt, agent=agent, message=message, cron=cron, interval=interval, timezone=timezone, overlap=overlap))
    out.print(f"Added {record.id}: next run {_when(record.next_run)}.", markup=False)


def _set_paused(project: Path, database_url: str | None, schedule_id: str, paused: bool) -> Any:
    from ..records import now_ms
    from ..store import serviceops as ops
    from .scheduler import next_after

    async def body(rt: Any) -> Any:
        record = await _find(rt, schedule_id)
        now = now_ms()
        following = None if paused else next_after(record.cron, record.interval_s, record.timezone, now, 0)
        await ops.run_op(rt.store, ops.set_paused, record.id, paused, following, now)
        return record

    return _with_runtime(project, database_url, body)


@schedules_app.command("pause")
def pause_command(schedule_id: IdArg, project: ProjectArg = Path("."), database_url: DbOpt = None) -> None:
    """Pause a schedule: no run until it is resumed."""
    record = _set_paused(project, database_url, schedule_id, True)
    out.print(f"Paused {record.id}.", markup=False)


@schedules_app.command("resume")
def resume_command(schedule_id: IdArg, project: ProjectArg = Path("."), database_url: DbOpt = None) -> None:
    """Resume a paused schedule from its next tick (ticks passed while paused are not run)."""
    record = _set_paused(project, database_url, schedule_id, False)
    out.print(f"Resumed {record.id}.", markup=False)


@schedules_app.command("delete")
def delete_command(schedule_id: IdArg, project: ProjectArg = Path("."), database_url: DbOpt = None) -> None:
    """Delete a schedule made at run time (a project's schedule is removed with its file)."""
    from ..store import serviceops as ops

    async def body(rt: Any) -> Any:
        record = await _find(rt, schedule_id)
        if record.source == "project":
            raise StandardAgentsError(f"schedule {record.name!r} is defined in the project: remove its file "
                                      "(or pause it)")
        await ops.run_op(rt.store, ops.delete_schedule, record.id)
        return record

    record = _with_runtime(project, database_url, body)
    out.print(f"Deleted {record.id}.", markup=False)
