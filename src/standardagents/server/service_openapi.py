"""The OpenAPI description of ``/api/schedules`` and ``/api/webhooks`` (joined into the
server's document by :func:`standardagents.server.openapi.openapi_document`)."""

from __future__ import annotations

from typing import Any

__all__ = ["service_openapi"]


def _id(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def service_openapi(prefix: str) -> dict[str, Any]:
    from .openapi import _op

    s, w = f"{prefix}/schedules", f"{prefix}/webhooks"
    one_s, one_w = f"{s}/{{schedule_id}}", f"{w}/{{webhook_id}}"
    sid, wid = [_id("schedule_id")], [_id("webhook_id")]
    json_ = ("application/json",)
    schedule_body = {"type": "object", "required": ["agent", "message"], "properties": {
        "agent": {"type": "string"}, "message": {"type": "string"},
        "cron": {"type": "string", "description": "five fields; give cron or interval"},
        "interval": {"type": "integer", "minimum": 1, "description": "seconds"},
        "timezone": {"type": "string", "description": "an IANA name (default UTC)"},
        "thread": {"type": "string", "description": "every run talks in this thread (default: a new one each run)"},
        "overlap": {"type": "string", "enum": ["skip", "queue", "cancel"]},
        "missed": {"type": "string", "enum": ["once", "skip"]}, "paused": {"type": "boolean"}}}
    webhook_body = {"type": "object", "required": ["url", "events"], "properties": {
        "url": {"type": "string"}, "events": {"type": "array", "items": {"type": "string", "enum": [
            "execution.done", "execution.failed", "approval.requested", "schedule.failed", "*"]}},
        "secret": {"type": "string", "description": "a whsec_ secret (default: a new one, answered once)"},
        "thread": {"type": "string", "description": "only this thread's events (required unless an admin)"}}}
    return {
        s: {"get": _op("The caller's schedules (an admin: every one)", tag="schedules"),
            "post": _op("Make a schedule: 201 with its id", tag="schedules", ok={"201": json_}, body=schedule_body,
                        errors=(403, 404))},
        one_s: {"get": _op("One schedule", tag="schedules", params=sid, errors=(404,)),
                "delete": _op("Delete a schedule made at run time", tag="schedules", params=sid, errors=(404, 409))},
        f"{one_s}/runs": {"get": _op("Its ticks: started, skipped or failed", tag="schedules", params=sid,
                                     errors=(404,))},
        f"{one_s}/pause": {"post": _op("Pause it", tag="schedules", params=sid, errors=(404,))},
        f"{one_s}/resume": {"post": _op("Resume it from the next tick", tag="schedules", params=sid, errors=(404,))},
        w: {"get": _op("The caller's webhook subscriptions", tag="webhooks"),
            "post": _op("Subscribe a URL: 201 with its id and signing secret", tag="webhooks", ok={"201": json_},
                        body=webhook_body, errors=(403, 404))},
        one_w: {"delete": _op("Unsubscribe", tag="webhooks", params=wid, errors=(404, 409))},
        f"{one_w}/deliveries": {"get": _op("Its events and every delivery attempt", tag="webhooks", params=wid,
                                           errors=(404,))},
        f"{one_w}/deliveries/{{message_id}}/replay": {"post": _op(
            "Send one event again", tag="webhooks", params=[*wid, _id("message_id")], ok={"202": json_},
            errors=(404,))},
    }
