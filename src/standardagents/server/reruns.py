"""Re-running one step of a turn with another model or system prompt, as a new branch.

``POST .../executions/{id}/steps/{n}/rerun`` copies the messages step ``n`` was sent into a new
thread (a fork: the original thread is never changed) and runs that thread's next turn with
the chosen model and/or system prompt in place of the side's, so the two answers can be read
side by side. The new thread's ``rerunOf`` metadata points back at the step it re-ran.

Whoever may read the thread may re-run a step as it was. Choosing the model or the system
prompt is for admins and a ``--dev`` server only, unless the thread's agent allows it
(``allow_overrides``): where end users chat, the prompt is the operator's policy and the model
a cost decision. An execution's details say whether its caller may (``rerunOverrides``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ..engine.overrides import MAX_SYSTEM
from ..engine.steps import execution_detail
from ..records import ThreadRecord, new_id
from ..store.base import UserRecord
from ..store.checks import check_text
from .auth import authenticate, require_thread
from .errors import ApiError, JSONResponse, read_json
from .forks import branch
from .state import server_of

__all__ = ["OVERRIDES_REFUSED", "overrides_allowed", "rerun_step"]

#: the one answer to a re-run with a model or system prompt its caller may not choose
OVERRIDES_REFUSED = ("choosing the model or the system prompt of a re-run needs an admin (or a --dev server), "
                     "unless the agent allows it (allow_overrides=True); re-run the step without 'model' and "
                     "'system' to run it as it was")


async def overrides_allowed(request: Request, caller: UserRecord, thread: ThreadRecord) -> bool:
    """Whether ``caller`` may re-run a step of ``thread`` with another model or system prompt."""
    if caller.is_admin or server_of(request).dev:
        return True
    rt = server_of(request).runtime
    if not rt.registry.has("agents", thread.agent, thread.package):
        return False  # an agent the project no longer has allows nothing
    return bool((await rt.agent(thread.agent, thread.package)).allow_overrides)


def _fields(body: dict[str, Any]) -> tuple[str | None, str | None]:
    model, system = body.get("model"), body.get("system")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise ApiError(422, "field 'model' must be the name of a model definition")
    if system is not None and not isinstance(system, str):
        raise ApiError(422, "field 'system' must be the system prompt's text")
    if system is not None and len(system) > MAX_SYSTEM:
        raise ApiError(422, f"field 'system' is at most {MAX_SYSTEM} characters (got {len(system)})")
    return (model.strip() if model is not None else None), system


async def rerun_step(request: Request) -> Response:
    """``{"model"?, "system"?}`` → 201 with the new ``thread`` and its turn's ``executionId``;
    the turn runs on (follow the thread's stream), or has ended with ``?wait=true`` (then
    ``result`` is how). 404: no such execution or step; 422: an unknown model or bad field;
    403: a caller who may not read the thread, or may not choose a model or system prompt
    (:func:`overrides_allowed`); 409: the step's messages were rolled back."""
    from .api import _flag, _keep, thread_dict

    caller = await authenticate(request)
    execution_id = request.path_params["execution_id"]
    check_text("execution id", execution_id)
    server = server_of(request)
    rt = server.runtime
    record = await rt.store.get_execution(execution_id)
    if record is None:
        raise ApiError(404, f"unknown execution {execution_id!r}")
    source = await require_thread(request, record.thread_id, caller)
    index: int = request.path_params["n"]
    history = await rt.store.list_messages(source.id)
    steps = execution_detail(record, history, await rt.store.list_tool_results(source.id))["steps"]
    if index >= len(steps):
        raise ApiError(404, f"execution {execution_id} has no step {index} (its steps are numbered 0 to "
                            f"{len(steps) - 1})" if steps else f"execution {execution_id} has no model steps")
    model, system = _fields(await read_json(request, required=False))
    if (model is not None or system is not None) and not await overrides_allowed(request, caller, source):
        raise ApiError(403, OVERRIDES_REFUSED)
    if model is not None and not rt.registry.has("models", model, source.package):
        raise ApiError(422, f"unknown model {model!r}: choose one the runtime lists")
    step = steps[index]
    sent = step.get("sent") or {}
    cut = next((i for i, m in enumerate(history) if m.id == sent.get("last")), -1)
    if cut < 0 and sent.get("last"):
        raise ApiError(409, f"the messages step {index} was sent are no longer all in thread {source.id} "
                            "(a rollback removed them): it cannot be re-run")
    rerun_of = {"threadId": source.id, "threadTitle": source.title, "executionId": record.id, "step": index,
                "fromModel": step.get("model"), "model": model, "systemChanged": system is not None}
    fork = await branch(rt, source, history[: cut + 1], user_id=caller.id,
                        title=f"{source.title or source.agent} (re-run of step {index + 1})",
                        metadata={"rerunOf": rerun_of,
                                  "forkedFrom": {"threadId": source.id, "messageId": sent.get("last")}})
    turn_id = new_id("exe_")
    try:
        task = await rt.start(fork.id, None, start_side=step.get("side") or record.side or "a",
                              execution_id=turn_id, model=model, system=system)
    except BaseException:
        await rt.store.delete_thread(fork.id)
        raise
    _keep(request, task)
    result = None
    if _flag(request, "wait"):
        await asyncio.wait({task})
        if not task.cancelled():
            result = task.result().to_dict()
    body: dict[str, Any] = {"thread": thread_dict(fork, not task.done()), "executionId": turn_id, "rerunOf": rerun_of}
    if result is not None:
        body["result"] = result
    return JSONResponse(body, status_code=201, headers={"Location": f"{server.prefix}/threads/{fork.id}"})
