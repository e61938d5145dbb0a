"""``/api/webhooks``: subscriptions made at run time, their delivery log and replays.

The signing secret is shown once, in the answer to the ``POST`` that made the subscription.
A caller sees its own subscriptions (an admin every one).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..records import now_ms
from ..service.webhooks import create_webhook
from ..store import serviceops as ops
from ..store.base import UserRecord
from ..store.checks import check_text
from ..store.serviceops import WebhookRecord, run_op
from .auth import authenticate, require_thread
from .errors import ApiError, JSONResponse, read_json
from .state import server_of

__all__ = ["subscribe_run", "webhook_routes"]

Unsubscribe = Callable[[], Awaitable[None]]


async def _mine(request: Request, caller: UserRecord) -> WebhookRecord:
    webhook_id = request.path_params["webhook_id"]
    check_text("webhook id", webhook_id, max_length=255)
    record = await run_op(server_of(request).runtime.store, ops.get_webhook, webhook_id, write=False)
    if record is None or not (caller.is_admin or record.user_id == caller.id):
        raise ApiError(404, f"unknown webhook {webhook_id!r} (GET /api/webhooks lists yours)")
    return record


def _str(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise ApiError(422, f"field {name!r} must be a string")
    check_text(f"field {name!r}", value, max_length=2000)
    return value


async def create(request: Request) -> Response:
    caller = await authenticate(request)
    body = await read_json(request)
    url = _str(body, "url")
    if not url:
        raise ApiError(422, "field 'url' is required: where to POST the events")
    thread_id = _str(body, "thread") or _str(body, "threadId")
    if thread_id is not None:
        await require_thread(request, thread_id, caller)
    if thread_id is None and not caller.is_admin:
        raise ApiError(403, "only an admin may subscribe to the events of every thread; give 'thread' for one of yours")
    record = await create_webhook(server_of(request).runtime, url, body.get("events"), secret=_str(body, "secret"),
                                  thread_id=thread_id, user_id=caller.id)
    return JSONResponse(record.to_dict(secret=True), status_code=201)


async def _nothing() -> None:
    return None


async def subscribe_run(request: Request, caller: UserRecord, thread_id: str, execution_id: str,
                        spec: Any) -> tuple[WebhookRecord | None, Unsubscribe]:
    """The ``webhook`` of a message (``{url, events?, secret?}``): a subscription to that
    execution's events alone (``execution.done`` unless ``events`` names others; it always
    ends with the execution's ``execution.done``, after which it is removed). Returns what
    removes it again when the turn does not start."""
    if spec is None:
        return None, _nothing
    if not isinstance(spec, dict):
        raise ApiError(422, "field 'webhook' must be an object: {\"url\", \"events\"?, \"secret\"?}")
    unknown = sorted(set(spec) - {"url", "events", "secret"})
    if unknown:
        raise ApiError(422, f"field 'webhook' has unknown field {unknown[0]!r} (known: url, events, secret)")
    url = _str(spec, "url")
    if not url:
        raise ApiError(422, "field 'webhook.url' is required: where to POST this execution's events")
    rt = server_of(request).runtime
    record = await create_webhook(rt, url, spec.get("events", ["execution.done"]), secret=_str(spec, "secret"),
                                  thread_id=thread_id, user_id=caller.id, execution_id=execution_id)

    async def unsubscribe() -> None:
        await run_op(rt.store, ops.delete_webhook, record.id)

    return record, unsubscribe


async def list_all(request: Request) -> Response:
    caller = await authenticate(request)
    records = await run_op(server_of(request).runtime.store, ops.list_webhooks,
                           None if caller.is_admin else caller.id, write=False)
    return JSONResponse({"webhooks": [r.to_dict() for r in records]})


async def delete(request: Request) -> Response:
    caller = await authenticate(request)
    record = await _mine(request, caller)
    if record.source == "project":
        raise ApiError(409, f"webhook {record.name!r} is defined in the project: remove its file")
    await run_op(server_of(request).runtime.store, ops.delete_webhook, record.id)
    return JSONResponse({"id": record.id, "deleted": True})


async def deliveries(request: Request) -> Response:
    """The subscription's events (newest first) and its attempts at sending them."""
    caller = await authenticate(request)
    record = await _mine(request, caller)
    store = server_of(request).runtime.store
    events = await run_op(store, ops.list_outbox, record.id, 200, write=False)
    attempts = await run_op(store, ops.list_attempts, record.id, 500, write=False)
    return JSONResponse({"deliveries": [e.to_dict() for e in events], "attempts": [a.to_dict() for a in attempts]})


async def replay(request: Request) -> Response:
    caller = await authenticate(request)
    record = await _mine(request, caller)
    message_id = request.path_params["message_id"]
    check_text("message id", message_id, max_length=255)
    if not await run_op(server_of(request).runtime.store, ops.replay, record.id, message_id, now_ms()):
        raise ApiError(404, f"webhook {record.id} has no delivery {message_id!r}")
    return JSONResponse({"id": message_id, "status": "pending"}, status_code=202)


def webhook_routes(prefix: str) -> list[BaseRoute]:
    p = f"{prefix}/webhooks"
    one = f"{p}/{{webhook_id}}"
    return [
        Route(p, create, methods=["POST"]),
        Route(p, list_all, methods=["GET"]),
        Route(one, delete, methods=["DELETE"]),
        Route(f"{one}/deliveries", deliveries, methods=["GET"]),
        Route(f"{one}/deliveries/{{message_id}}/replay", replay, methods=["POST"]),
    ]
