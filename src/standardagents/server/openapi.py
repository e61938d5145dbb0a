"""The OpenAPI 3.1 document of the built-in API, assembled by hand so it states exactly
what the routes accept and answer: every operation lists every status it can answer, each
error with the shared error body."""

from __future__ import annotations

from typing import Any

__all__ = ["openapi_document"]

_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {
    "type": "object", "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
    "required": ["code", "message"]}}}

_THREAD = {"type": "object", "properties": {
    "id": {"type": "string"}, "agent_id": {"type": "string"}, "user_id": {"type": ["string", "null"]},
    "title": {"type": ["string", "null"]}, "metadata": {"type": "object"}, "created_at": {"type": "integer"},
    "updated_at": {"type": "integer"}, "running": {"type": "boolean"}}}

_INT64 = 2**63 - 1
_PAGE = [
    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 500}},
    {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": _INT64}},
]
_THREAD_ID = {"name": "thread_id", "in": "path", "required": True, "schema": {"type": "string"}}
_KEY = {"name": "key", "in": "path", "required": True, "schema": {"type": "string", "minLength": 1, "maxLength": 200}}
_PATH = {"name": "path", "in": "path", "required": True, "schema": {"type": "string"}}
_FILE_QUERY = [{"name": n, "in": "query", "schema": {"type": t}}
               for n, t in (("prefix", "string"), ("dir", "string"), ("glob", "string"), ("grep", "string"),
                            ("ignoreCase", "boolean"), ("limit", "integer"))]
_FILE_READ_QUERY = [{"name": n, "in": "query", "schema": {"type": t}}
                    for n, t in (("stat", "boolean"), ("offset", "integer"), ("length", "integer"))]

_GRANT_NAME = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
_GRANT_BODY = {"type": "object", "required": ["name", "secret", "tools"], "additionalProperties": False, "properties": {
    "name": {"type": "string", "description": "1 to 64 letters, digits, '_', '.' or '-'"},
    "secret": {"type": "string", "description": "the credential; never answered back"},
    "tools": {"type": "array", "items": {"type": "string"}, "description": "the tools that may use it"},
    "scopes": {"type": "array", "items": {"type": "string"}},
    "expiresAt": {"type": ["integer", "string", "null"], "description": "epoch milliseconds or an ISO 8601 time"},
    "expiresIn": {"type": ["number", "null"], "description": "seconds from now"},
    "description": {"type": ["string", "null"], "maxLength": 500}}}

_REASONS = {
    400: "malformed request: invalid JSON, NaN or infinity, too deep, invalid Unicode, a NUL character, "
         "a number out of range",
    401: "missing or invalid API token", 403: "the caller may not use this thread or action",
    404: "no such thread, file, value or model", 409: "the effect already ran, the thread's running turn did not stop, or the thread is busy and the "
         "message's busy policy is reject",
    413: "the body is over the size limit", 415: "the body is not JSON",
    422: "a field or query parameter has the wrong value", 502: "the agent failed",
    429: "the agent's model is rate limited (Retry-After) or a usage limit stopped the turn",
    503: "the agent's model is unavailable", 504: "the agent's model timed out",
}
#: what every operation can answer: a NUL in the URL (400) and no or a bad token (401)
_ALWAYS = (400, 401)
#: an operation on one thread: the thread is unknown (404) or another user's (403)
_THREAD_ERRORS = (403, 404)
#: an operation that reads a JSON body
_BODY_ERRORS = (413, 415, 422)


def _op(summary: str, *, params: list[dict[str, Any]] | None = None, body: dict[str, Any] | None = None,
        ok: dict[str, tuple[str, ...]] | None = None, errors: tuple[int, ...] = (), tag: str = "threads") -> dict[str, Any]:
    """One operation; ``ok`` maps each success status to its media types (none for 204)."""
    responses: dict[str, Any] = {}
    for status, media in (ok or {"200": ("application/json",)}).items():
        response: dict[str, Any] = {"description": "success"}
        if media:
            response["content"] = {m: {} for m in media}
        responses[status] = response
    for status in sorted({*_ALWAYS, *errors, *(_BODY_ERRORS if body is not None else ())}):
        responses[str(status)] = {"description": _REASONS[status],
                                  "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    op: dict[str, Any] = {"summary": summary, "tags": [tag], "parameters": params or [], "responses": responses}
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    return op


def _flag(name: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "schema": {"type": "boolean"}}


def openapi_document(prefix: str) -> dict[str, Any]:
    """The document for routes mounted under ``prefix``."""
    p, t = prefix, f"{prefix}/threads/{{thread_id}}"
    json_ = ("application/json",)
    thread_op = (*_THREAD_ERRORS,)
    message_body = {"type": "object", "properties": {
        "content": {"type": "string"}, "attachments": {"type": "array", "items": {"type": "object"}},
        "parts": {"type": "array", "items": {"type": "object"}}, "metadata": {"type": "object"},
        "silent": {"type": "boolean"},
        "outputType": {"type": "object", "description": "a JSON Schema the turn's final answer must match"},
        "outputRetries": {"type": "integer", "minimum": 0},
        "usageLimits": {"type": "object", "description": "what the turn may spend (requests, tokens, tool calls, USD)"},
        "webhook": {"type": "object", "required": ["url"], "description": "subscribe a URL to this execution's events "
                    "alone (default ['execution.done'], always ending with it; removed once it was delivered); the "
                    "answer carries it with its secret", "properties": {
                        "url": {"type": "string"}, "events": {"type": "array", "items": {"type": "string"}},
                        "secret": {"type": "string"}}},
        "busy": {"type": "string", "enum": ["enqueue", "reject", "interrupt", "rollback"],
                 "description": "when the thread runs a turn: wait (enqueue), 409 (reject), stop it keeping its "
                                "work (interrupt) or removing it (rollback); default: the agent's busy"}}}
    paths: dict[str, Any] = {
        f"{p}/agents": {"get": _op("List agents (primary only unless all=true)", tag="agents", params=[_flag("all")],
                                   errors=(422,))},
        f"{p}/threads": {
            "get": _op("List threads", params=[*_PAGE, {"name": "agent", "in": "query", "schema": {"type": "string"}},
                                               {"name": "user", "in": "query", "schema": {"type": "string"}},
                                               _flag("top_level")],
                       errors=(403, 422)),
            "post": _op("Create a thread", ok={"201": json_}, errors=(403,), body={
                "type": "object", "required": ["agent"], "properties": {
                    "agent": {"type": "string"}, "title": {"type": "string"}, "metadata": {"type": "object"},
                    "user_id": {"type": "string"}}}),
        },
        t: {"get": _op("Get a thread", params=[_THREAD_ID], errors=thread_op),
            "delete": _op("Delete a thread (a turn running on any worker is stopped first; 409 when it does not stop)",
                          params=[_THREAD_ID], ok={"204": ()}, errors=(*thread_op, 409)),
            "patch": _op("Rename a thread (title null clears it)", params=[_THREAD_ID], errors=thread_op,
                         body={"type": "object", "required": ["title"], "properties": {
                             "title": {"type": ["string", "null"], "maxLength": 200}}})},
        f"{t}/fork": {"post": _op(
            "Fork a thread: a new thread of the same agent, owned by the caller, with copies of the messages "
            "up to and including messageId", params=[_THREAD_ID], ok={"201": json_}, errors=thread_op,
            body={"type": "object", "required": ["messageId"], "properties": {
                "messageId": {"type": "string"}, "title": {"type": ["string", "null"], "maxLength": 200}}})},
        f"{t}/messages": {
            "get": _op("List messages", params=[_THREAD_ID, *_PAGE, _flag("include_silent")], errors=(*thread_op, 422)),
            "post": _op("Send a message: 202 with the execution id, SSE with stream=true, the result with wait=true",
                        ok={"202": json_, "200": ("application/json", "text/event-stream")}, body=message_body,
                        params=[_THREAD_ID, _flag("stream"), _flag("wait")], errors=(*thread_op, 409)),
        },
        f"{t}/stop": {"post": _op("Stop the running execution, on whichever worker runs it", params=[_THREAD_ID],
                                  errors=thread_op)},
        f"{t}/executions": {"get": _op("The thread's executions with outcome, value, usage and cost",
                                       params=[_THREAD_ID], errors=thread_op)},
        f"{t}/subagents": {"get": _op("The subagent runs the thread started, each with its child thread id",
                                      params=[_THREAD_ID], errors=thread_op)},
        f"{p}/executions/{{execution_id}}": {"get": _op(
            "One execution: its steps (model calls with their tool calls), usage, cost, timings and trace id",
            params=[{"name": "execution_id", "in": "path", "required": True, "schema": {"type": "string"}}],
            errors=thread_op)},
        f"{p}/executions/{{execution_id}}/cancel": {"post": _op(
            "Cancel this execution only: queued (it never runs), running on any worker, or waiting; "
            "cancelled is false when it had already ended",
            params=[{"name": "execution_id", "in": "path", "required": True, "schema": {"type": "string"}}],
            errors=thread_op)},
        f"{p}/executions/{{execution_id}}/steps/{{n}}": {"get": _op(
            "Step n (its index in the execution) as the model saw it: the messages it was sent (system prompt "
            "first, as rendered), the tool schemas offered, the reply (text, reasoning, tool calls) and each tool "
            "call's result and duration, usage and cost; exact is false when the rebuilt messages differ in "
            "number from those sent",
            params=[{"name": "execution_id", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "n", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 0}}],
            errors=thread_op)},
        f"{p}/executions/{{execution_id}}/steps/{{n}}/rerun": {"post": _op(
            "Re-run step n (its index in the execution) as a new branch: a new thread, owned by the caller, with "
            "copies of the messages that step was sent, whose next turn runs with the given model and/or system "
            "prompt in place of the side's; the original thread is unchanged. 201 with the new thread and the "
            "turn's execution id (with wait=true, once the turn ended, with its result)",
            params=[{"name": "execution_id", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "n", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 0}},
                    _flag("wait")],
            ok={"201": json_}, errors=(*thread_op, 409, 422),
            body={"type": "object", "properties": {"model": {"type": "string", "minLength": 1},
                                                   "system": {"type": "string"}}})},
        f"{p}/runtime": {"get": _op("The runtime view (admins): agents with their sides' prompts, models, tools "
                                    "(with origins and what each declares it touches) and hooks; running executions, calls waiting for approval, "
                                    "pending effects and recent failed executions", tag="runtime", errors=(403,))},
        f"{p}/usage": {"get": _op("Tokens and cost summed, by agent, model, user or day", tag="usage",
                                  errors=(403, 404, 422), params=[
            {"name": name, "in": "query", "schema": {"type": "string"}}
            for name in ("by", "agent", "model", "user", "thread", "since", "until")])},
        f"{t}/effects": {"get": _op("Scheduled effects of the thread", errors=thread_op, params=[_THREAD_ID, {
            "name": "status", "in": "query", "schema": {"type": "string"}}])},
        f"{p}/effects/{{effect_id}}/cancel": {"post": _op("Cancel a pending effect", errors=(*thread_op, 409), params=[
            {"name": "effect_id", "in": "path", "required": True, "schema": {"type": "string"}}])},
        f"{t}/approvals": {
            "get": _op("Calls waiting for approval, each with interruption {id, toolName, args} and its stateToken",
                       params=[_THREAD_ID], errors=thread_op),
            "post": _op("Approve or deny a paused call; the last decision resumes the same execution",
                        ok={"200": json_, "202": json_}, errors=thread_op,
                        params=[_THREAD_ID], body={"type": "object", "required": ["token", "approved"], "properties": {
                            "token": {"type": "string"}, "approved": {"type": "boolean"}, "reason": {"type": "string"}}}),
        },
        f"{t}/stream": {"get": _op("Live events (SSE); includeReasoning=true adds reasoning chunks",
                                   ok={"200": ("text/event-stream",)}, errors=thread_op,
                                   params=[_THREAD_ID, _flag("includeReasoning")])},
        f"{t}/ws": {"get": _op("Live events (WebSocket)", params=[_THREAD_ID], ok={"101": ()}, errors=thread_op)},
        f"{t}/files": {"get": _op("List thread files; dir= lists a directory, glob= finds by pattern, "
                                  "grep= searches lines by regex", params=[_THREAD_ID, *_FILE_QUERY],
                                  errors=(*thread_op, 422))},
        f"{t}/files/{{path}}": {
            "get": _op("Read a thread file (served with its own media type); stat=true for its stats, "
                       "offset=/length= for a chunk", params=[_THREAD_ID, _PATH, *_FILE_READ_QUERY],
                       ok={"200": ("*/*",)}, errors=(*thread_op, 422)),
            "put": _op("Write a thread file (raw body, up to 1,024 characters of path)", params=[_THREAD_ID, _PATH],
                       ok={"200": json_, "201": json_}, errors=(*thread_op, 413, 422)),
        },
        f"{t}/logs": {"get": _op("List thread logs", params=[_THREAD_ID, *_PAGE], errors=(*thread_op, 422))},
        f"{p}/users/me": {"get": _op("The caller", tag="users")},
        f"{p}/users/me/stream": {"get": _op("The caller's live events (SSE)", tag="users",
                                            ok={"200": ("text/event-stream",)})},
        f"{p}/users/me/values": {"get": _op("The caller's values", tag="users")},
        f"{p}/users/me/values/{{key}}": {
            "get": _op("Read a value", tag="users", params=[_KEY], errors=(404, 422)),
            "put": _op("Write a value", tag="users", params=[_KEY], body={"type": "object", "required": ["value"]}),
            "delete": _op("Delete a value", tag="users", params=[_KEY], ok={"204": ()}, errors=(404, 422)),
        },
        f"{p}/users/me/grants": {
            "get": _op("The caller's credential grants (never their secrets)", tag="users"),
            "post": _op("Grant a secret to named tools (replaces a grant of the same name); 201 with the grant, "
                        "without the secret", tag="users", ok={"201": json_}, body=_GRANT_BODY),
        },
        f"{p}/users/me/grants/{{name}}": {
            "get": _op("One of the caller's grants (without the secret)", tag="users", params=[_GRANT_NAME],
                       errors=(404,)),
            "delete": _op("Revoke a grant: its secret is dropped, its record stays as revoked", tag="users",
                          params=[_GRANT_NAME], errors=(404,)),
        },
        "/v1/models": {"get": _op("Agents as OpenAI models (the primary ones)", tag="openai")},
        "/v1/chat/completions": {"post": _op(
            "OpenAI-compatible chat completions (model = a primary agent's name); errors in OpenAI's shape",
            tag="openai", ok={"200": ("application/json", "text/event-stream")},
            errors=(403, 404, 409, 429, 502, 503, 504),
            body={"type": "object", "required": ["model", "messages"]})},
        "/v1/responses": {"post": _op(
            "OpenAI-compatible Responses API (model = a primary agent's name); errors in OpenAI's shape",
            tag="openai", ok={"200": ("application/json", "text/event-stream")},
            errors=(403, 404, 409, 429, 502, 503, 504), body={"type": "object", "required": ["model", "input"]})},
        "/v1/responses/{response_id}": {"get": _op(
            "A stored response", tag="openai", errors=(403, 404),
            params=[{"name": "response_id", "in": "path", "required": True, "schema": {"type": "string"}}])},
    }
    from .health import health_openapi

    paths.update(health_openapi())
    from .service_openapi import service_openapi

    paths.update(service_openapi(p))
    paths[f"{p}/openapi.json"] = {"get": {"summary": "This document", "tags": ["meta"], "security": [],
                                          "responses": {"200": {"description": "success",
                                                                "content": {"application/json": {}}}}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "standardagents API", "version": "1"},
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
                       "schemas": {"Error": _ERROR, "Thread": _THREAD}},
        "security": [{"bearer": []}],
        "paths": paths,
    }
