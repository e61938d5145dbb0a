"""Schedule definitions: a turn of an agent that recurs on a cron expression or an interval."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from pydantic import Field, model_validator

from ._base import Definition, build, check_snake_case

__all__ = ["MissedPolicy", "OverlapPolicy", "ScheduleDefinition", "check_timing", "define_schedule"]

#: a tick while the previous run still goes: skip the tick, queue it behind, or cancel the previous
OverlapPolicy = Literal["skip", "queue", "cancel"]
#: ticks that passed while no worker ran: run once for all of them, or skip them
MissedPolicy = Literal["once", "skip"]


def check_timing(cron: str | None, interval: int | None, timezone: str) -> str | None:
    """A problem with a schedule's timing, or None: exactly one of a valid 5-field cron
    expression and a positive interval, and a known IANA time zone."""
    if (cron is None) == (interval is None):
        return "give exactly one of 'cron' (an expression) and 'interval' (seconds)"
    if cron is not None and (not isinstance(cron, str) or not croniter.is_valid(cron)):
        return f"'cron': {cron!r} is not a valid cron expression (five fields: minute hour day month weekday)"
    if interval is not None and (isinstance(interval, bool) or not isinstance(interval, int) or interval < 1):
        return f"'interval' must be a whole number of seconds, at least 1 (got {interval!r})"
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        return f"'timezone': unknown time zone {timezone!r} (an IANA name such as 'Europe/Paris' or 'UTC')"
    return None


class ScheduleDefinition(Definition):
    """A recurring turn: ``agent`` gets ``message`` (or what the function returns) on each
    tick of ``cron`` (in ``timezone``) or every ``interval`` seconds, in a new thread each
    time or always in one (``same_thread``)."""

    name: str
    agent: str
    message: str | Callable[[], str | Awaitable[str]]
    cron: str | None = None
    interval: int | None = Field(default=None)
    timezone: str = "UTC"
    same_thread: bool = False
    overlap: OverlapPolicy = "skip"
    missed: MissedPolicy = "once"
    paused: bool = False

    @model_validator(mode="after")
    def _timing(self) -> ScheduleDefinition:
        problem = check_timing(self.cron, self.interval, self.timezone)
        if problem:
            raise ValueError(problem)
        return self


def define_schedule(name: str, *, agent: str, message: str | Callable[[], Any], cron: str | None = None,
                    interval: int | None = None, timezone: str = "UTC", same_thread: bool = False,
                    overlap: OverlapPolicy = "skip", missed: MissedPolicy = "once",
                    paused: bool = False) -> ScheduleDefinition:
    """Define a schedule (a file in the project's ``agents/schedules/``)."""
    data: dict[str, Any] = {"name": name, "agent": agent, "message": message, "cron": cron, "interval": interval,
                            "timezone": timezone, "same_thread": same_thread, "overlap": overlap, "missed": missed,
                            "paused": paused}
    problems: list[tuple[str, str]] = []
    if isinstance(name, str) and (bad := check_snake_case(name)):
        problems.append(("name", bad))
    return build(ScheduleDefinition, data, problems)
