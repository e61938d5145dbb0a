"""Thread edits the web app needs: rename a thread, and fork one at a message.

A fork is how the chat offers "edit and resend" and "regenerate" without rewriting history:
the new thread holds copies of the messages up to the chosen one and the original stays as
it was, so both can be read (and inspected) side by side.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..records import Message, ThreadRecord, new_id
from .auth import authenticate, require_thread
from .errors import ApiError, JSONResponse, read_json
from .state import server_of

__all__ = ["branch", "fork_thread", "rename_thread"]

_MAX_TITLE = 200


def _title(body: dict[str, Any], *, required: bool) -> str | None:
    if "title" not in body:
        if required:
            raise ApiError(422, "send {\"title\": \"...\"} (or null to clear it)")
        return None
    title = body["title"]
    if title is None:
        return None
    if not isinstance(title, str):
        raise ApiError(422, "field 'title' must be a string or null")
    title = title.strip()
    if len(title) > _MAX_TITLE:
        raise ApiError(422, f"field 'title' is at most {_MAX_TITLE} characters (got {len(title)})")
    return title or None


async def rename_thread(request: Request) -> Response:
    """``PATCH .../threads/{id}`` with ``{"title"}``: set (or clear, with null) the title."""
    from .api import thread_dict

    caller = await authenticate(request)
    thread = await require_thread(request, request.path_params["thread_id"], caller)
    title = _title(await read_json(request), required=True)
    updated = await server_of(request).runtime.store.update_thread(thread.id, title=title)
    return JSONResponse(thread_dict(updated))


async def fork_thread(request: Request) -> Response:
    """``POST .../threads/{id}/fork`` with ``{"messageId", "title"?}``: a new thread of the same
    agent, owned by the caller, holding copies of the messages up to and including that one
    (201). Whoever may read the thread may fork it; the copies are written in one commit."""
    from .api import thread_dict

    caller = await authenticate(request)
    source = await require_thread(request, request.path_params["thread_id"], caller)
    body = await read_json(request)
    message_id = body.get("messageId", body.get("message_id"))
    if not isinstance(message_id, str) or not message_id:
        raise ApiError(422, "send the id of the last message to keep as 'messageId'")
    title = _title(body, required=False)
    rt = server_of(request).runtime
    history = await rt.store.list_messages(source.id)
    cut = next((i for i, m in enumerate(history) if m.id == message_id), None)
    if cut is None:
        raise ApiError(422, f"thread {source.id} has no message {message_id!r}")
    _check_whole_steps(history, cut)
    fork = await branch(rt, source, history[: cut + 1], user_id=caller.id,
                        title=title or f"{source.title or source.agent} (fork)",
                        metadata={"forkedFrom": {"threadId": source.id, "messageId": message_id}})
    return JSONResponse(thread_dict(fork, False), status_code=201,
                        headers={"Location": f"{server_of(request).prefix}/threads/{fork.id}"})


async def branch(rt: Any, source: ThreadRecord, kept: list[Message], *, user_id: str, title: str,
                 metadata: dict[str, Any]) -> ThreadRecord:
    """A new thread of ``source``'s agent, owned by ``user_id``, holding copies of ``kept``
    (written in one commit; a thread whose copies could not be written is removed)."""
    fork = await rt.create_thread(source.agent, user_id=user_id, namespace=source.package, title=title,
                                  metadata={**{k: v for k, v in source.metadata.items() if k != "rerunOf"}, **metadata})
    if kept:
        try:
            await rt.store.commit_step(messages=[_copy(m, fork.id) for m in kept])
        except BaseException:
            await rt.store.delete_thread(fork.id)
            raise
    return fork


def _check_whole_steps(history: list[Message], cut: int) -> None:
    """A fork ends between steps: a model's tool calls without their results would be a
    history no provider accepts, so such a cut is refused and the step's end named."""
    asked = {c.id for m in history[: cut + 1] for c in m.tool_calls or ()}
    answered = {m.tool_call_id for m in history[: cut + 1] if m.role == "tool"}
    open_calls = asked - answered
    if not open_calls:
        return
    last = max((i for i, m in enumerate(history) if m.role == "tool" and m.tool_call_id in open_calls), default=None)
    hint = f"fork at {history[last].id} (its last result) or before the call" if last is not None else \
        "fork before the call"
    raise ApiError(422, f"message {history[cut].id} is inside a step: its tool calls "
                        f"({', '.join(sorted(open_calls))}) are answered by later messages; {hint}")


def _copy(message: Message, thread_id: str) -> Message:
    return message.copy(id=new_id("msg_"), thread_id=thread_id, seq=None,
                        metadata={**message.metadata, "forkedFrom": message.id})
