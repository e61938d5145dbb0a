"""``/api/schedules``: recurring turns made, listed, paused, resumed and deleted at run time.

A caller sees and changes its own schedules (an admin every one); a schedule's turns run as
the user who made it. Schedules defined in the project are listed, paused and resumed here,
but removed only by removing their file.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..records import now_ms
from ..service.scheduler import create_schedule, next_after
from ..store import serviceops as ops
from ..store.base import UserRecord
from ..store.checks import check_text
from ..store.serviceops import ScheduleRecord, run_op
from .auth import authenticate, require_thread
from .errors import ApiError, JSONResponse, read_json
from .state import server_of

__all__ = ["schedule_routes"]


#: the longest interval (ten years, in seconds)
MAX_INTERVAL = 315_360_000


def _field(body: dict[str, Any], name: str, kind: type, default: Any = None) -> Any:
    value = body.get(name, default)
    if value is not None and (not isinstance(value, kind) or (isinstance(value, bool) and kind is int)):
        expected = {str: "a string", int: "a whole number"}.get(kind, kind.__name__)
        raise ApiError(422, f"field {name!r} must be {expected} (got {value!r})"[:300])
    if isinstance(value, str):
        check_text(f"field {name!r}", value, max_length=100_000 if name == "message" else 255)
    if kind is int and isinstance(value, int) and not 1 <= value <= MAX_INTERVAL:
        raise ApiError(422, f"field {name!r} must be between 1 and {MAX_INTERVAL} seconds (got {value})")
    return value


async def _mine(request: Request, caller: UserRecord) -> ScheduleRecord:
    schedule_id = request.path_params["schedule_id"]
    check_text("schedule id", schedule_id, max_length=255)
    record = await run_op(server_of(request).runtime.store, ops.get_schedule, schedule_id, write=False)
    if record is None or not (caller.is_admin or record.user_id == caller.id):
        raise ApiError(404, f"unknown schedule {schedule_id!r} (GET /api/schedules lists yours)")
    return record


async def create(request: Request) -> Response:
    caller = await authenticate(request)
    body = await read_json(request)
    rt = server_of(request).runtime
    agent = _field(body, "agent", str)
    if not agent:
        raise ApiError(422, "field 'agent' is required: the agent each run talks to")
    thread_id = _field(body, "thread", str) or _field(body, "threadId", str)
    if thread_id is not None:
        thread = await require_thread(request, thread_id, caller)
        if thread.agent != agent:
            raise ApiError(422, f"field 'thread': thread {thread_id} talks to agent {thread.agent!r}, not {agent!r}")
    record = await create_schedule(
        rt, agent=agent, message=_field(body, "message", str) or "", cron=_field(body, "cron", str),
        interval=_field(body, "interval", int), timezone=_field(body, "timezone", str, "UTC"), thread_id=thread_id,
        overlap=_field(body, "overlap", str, "skip"), missed=_field(body, "missed", str, "once"),
        user_id=caller.id, paused=bool(body.get("paused", False)))
    return JSONResponse(record.to_dict(), status_code=201)


async def list_all(request: Request) -> Response:
    caller = await authenticate(request)
    records = await run_op(server_of(request).runtime.store, ops.list_schedules,
                           None if caller.is_admin else caller.id, write=False)
    return JSONResponse({"schedules": [r.to_dict() for r in records]})


async def get_one(request: Request) -> Response:
    caller = await authenticate(request)
    return JSONResponse((await _mine(request, caller)).to_dict())


async def runs(request: Request) -> Response:
    caller = await authenticate(request)
    record = await _mine(request, caller)
    rows = await run_op(server_of(request).runtime.store, ops.list_runs, record.id, 100, write=False)
    return JSONResponse({"runs": [r.to_dict() for r in rows]})


async def pause(request: Request) -> Response:
    caller = await authenticate(request)
    record = await _mine(request, caller)
    await run_op(server_of(request).runtime.store, ops.set_paused, record.id, True, None, now_ms())
    return JSONResponse({**record.to_dict(), "paused": True})


async def resume(request: Request) -> Response:
    """Resume from the next tick after now (ticks passed while paused are not run)."""
    caller = await authenticate(request)
    record = await _mine(request, caller)
    now = now_ms()
    following = next_after(record.cron, record.interval_s, record.timezone, now, 0)
    await run_op(server_of(request).runtime.store, ops.set_paused, record.id, False, following, now)
    return JSONResponse({**record.to_dict(), "paused": False, "nextRun": following})


async def delete(request: Request) -> Response:
    caller = await authenticate(request)
    record = await _mine(request, caller)
    if record.source == "project":
        raise ApiError(409, f"schedule {record.name!r} is defined in the project: remove its file "
                            "(or pause it here)")
    await run_op(server_of(request).runtime.store, ops.delete_schedule, record.id)
    return JSONResponse({"id": record.id, "deleted": True})


def schedule_routes(prefix: str) -> list[BaseRoute]:
    p = f"{prefix}/schedules"
    one = f"{p}/{{schedule_id}}"
    return [
        Route(p, create, methods=["POST"]),
        Route(p, list_all, methods=["GET"]),
        Route(one, get_one, methods=["GET"]),
        Route(one, delete, methods=["DELETE"]),
        Route(f"{one}/runs", runs, methods=["GET"]),
        Route(f"{one}/pause", pause, methods=["POST"]),
        Route(f"{one}/resume", resume, methods=["POST"]),
    ]
