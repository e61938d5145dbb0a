"""The OpenAPI 3.1 document of the built-in API, assembled by hand so it states exactly
what the routes accept and answer."""

from __future__ import annotations

from typing import Any

__all__ = ["openapi_document"]

_ERROR = {"type": "object", "properties": {"error": {"type": "object", "properties": {
    "code": {"type": "string"}, "message": {"type": "string"}}, "required": ["code", "message"]}}}

_THREAD = {"type": "object", "properties": {
    "id": {"type": "string"}, "agent_id": {"type": "string"}, "user_id": {"type": ["string", "null"]},
    "title": {"type": ["string", "null"]}, "metadata": {"type": "object"}, "created_at": {"type": "integer"},
    "updated_at": {"type": "integer"}, "running": {"type": "boolean"}}}

_PAGE = [
    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 500}},
    {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0}},
]
_THREAD_ID = {"name": "thread_id", "in": "path", "required": True, "schema": {"type": "string"}}
_KEY = {"name": "key", "in": "path", "required": True, "schema": {"type": "string"}}
_PATH = {"name": "path", "in": "path", "required": True, "schema": {"type": "string"}}
_FILE_QUERY = [{"name": n, "in": "query", "schema": {"type": t}}
               for n, t in (("prefix", "string"), ("dir", "string"), ("glob", "string"), ("grep", "string"),
                            ("ignoreCase", "boolean"), ("limit", "integer"))]
_FILE_READ_QUERY = [{"name": n, "in": "query", "schema": {"type": t}}
                    for n, t in (("stat", "boolean"), ("offset", "integer"), ("length", "integer"))]


def _op(summary: str, *, params: list[dict[str, Any]] | None = None, body: dict[str, Any] | None = None,
        ok: str = "200", content: str = "application/json", tag: str = "threads") -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "tags": [tag], "parameters": params or [],
                          "responses": {ok: {"description": "success", "content": {content: {}}},
                                        "401": {"description": "missing or invalid API token",
                                                "content": {"application/json": {"schema": _ERROR}}}}}
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    return op


def openapi_document(prefix: str) -> dict[str, Any]:
    """The document for routes mounted under ``prefix``."""
    p, t = prefix, f"{prefix}/threads/{{thread_id}}"
    message_body = {"type": "object", "properties": {
        "content": {"type": "string"}, "attachments": {"type": "array", "items": {"type": "object"}},
        "parts": {"type": "array", "items": {"type": "object"}}, "metadata": {"type": "object"},
        "silent": {"type": "boolean"}}}
    paths: dict[str, Any] = {
        f"{p}/agents": {"get": _op("List agents (primary only unless all=true)", tag="agents", params=[
            {"name": "all", "in": "query", "schema": {"type": "boolean"}}])},
        f"{p}/threads": {
            "get": _op("List threads", params=[*_PAGE, {"name": "agent", "in": "query", "schema": {"type": "string"}},
                                               {"name": "user", "in": "query", "schema": {"type": "string"}}]),
            "post": _op("Create a thread", ok="201", body={"type": "object", "required": ["agent"], "properties": {
                "agent": {"type": "string"}, "title": {"type": "string"}, "metadata": {"type": "object"},
                "user_id": {"type": "string"}}}),
        },
        t: {"get": _op("Get a thread", params=[_THREAD_ID]), "delete": _op("Delete a thread", params=[_THREAD_ID], ok="204")},
        f"{t}/messages": {
            "get": _op("List messages", params=[_THREAD_ID, *_PAGE, {"name": "include_silent", "in": "query",
                                                                      "schema": {"type": "boolean"}}]),
            "post": _op("Send a message: 202 with the execution id, SSE with stream=true, the result with wait=true",
                        ok="202", body=message_body, params=[_THREAD_ID,
                                                             {"name": "stream", "in": "query", "schema": {"type": "boolean"}},
                                                             {"name": "wait", "in": "query", "schema": {"type": "boolean"}}]),
        },
        f"{t}/stop": {"post": _op("Stop the running execution", params=[_THREAD_ID])},
        f"{t}/effects": {"get": _op("Scheduled effects of the thread", params=[_THREAD_ID, {
            "name": "status", "in": "query", "schema": {"type": "string"}}])},
        f"{p}/effects/{{effect_id}}/cancel": {"post": _op("Cancel a pending effect", params=[
            {"name": "effect_id", "in": "path", "required": True, "schema": {"type": "string"}}])},
        f"{t}/approvals": {
            "get": _op("Calls waiting for approval, with their resume tokens", params=[_THREAD_ID]),
            "post": _op("Approve or deny a paused call; the last decision resumes the same execution",
                        params=[_THREAD_ID], body={"type": "object", "required": ["token", "approved"], "properties": {
                            "token": {"type": "string"}, "approved": {"type": "boolean"}, "reason": {"type": "string"}}}),
        },
        f"{t}/stream": {"get": _op("Live events (SSE); includeReasoning=true adds reasoning chunks",
                                   content="text/event-stream", params=[_THREAD_ID, {
                                       "name": "includeReasoning", "in": "query", "schema": {"type": "boolean"}}])},
        f"{t}/ws": {"get": _op("Live events (WebSocket)", params=[_THREAD_ID], ok="101")},
        f"{t}/files": {"get": _op("List thread files; dir= lists a directory, glob= finds by pattern, "
                                  "grep= searches lines by regex", params=[_THREAD_ID, *_FILE_QUERY])},
        f"{t}/files/{{path}}": {"get": _op("Read a thread file; stat=true for its stats, offset=/length= for a chunk",
                                           params=[_THREAD_ID, _PATH, *_FILE_READ_QUERY], content="application/octet-stream"),
                                "put": _op("Write a thread file (raw body)", params=[_THREAD_ID, _PATH])},
        f"{t}/logs": {"get": _op("List thread logs", params=[_THREAD_ID, *_PAGE])},
        f"{p}/users/me": {"get": _op("The caller", tag="users")},
        f"{p}/users/me/stream": {"get": _op("The caller's live events (SSE)", tag="users", content="text/event-stream")},
        f"{p}/users/me/values": {"get": _op("The caller's values", tag="users")},
        f"{p}/users/me/values/{{key}}": {
            "get": _op("Read a value", tag="users", params=[_KEY]),
            "put": _op("Write a value", tag="users", params=[_KEY], body={"type": "object", "required": ["value"]}),
            "delete": _op("Delete a value", tag="users", params=[_KEY], ok="204"),
        },
        "/v1/models": {"get": _op("Agents as OpenAI models", tag="openai")},
        "/v1/chat/completions": {"post": _op("OpenAI-compatible chat completions (model = agent name)", tag="openai",
                                             body={"type": "object", "required": ["model", "messages"]})},
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "standardagents API", "version": "1"},
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
                       "schemas": {"Error": _ERROR, "Thread": _THREAD}},
        "security": [{"bearer": []}],
        "paths": paths,
    }
