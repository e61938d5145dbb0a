"""``GET /api/runtime``: what the runtime is made of and doing, in one read-only answer for
the web app's runtime view: each agent's sides with their prompt, model, tools (and where
each tool comes from) and hooks, and whether its readers may re-run steps with another model
or prompt (``allowOverrides``); the model definitions; the trace link template; running executions, calls waiting for approval, pending
scheduled effects and the latest failed executions.

Admins only (``dev`` serves a local admin): it shows every user's threads and the prompts'
text. Resume tokens of waiting calls are left out; deciding goes through the thread's own
approvals endpoint."""

from __future__ import annotations

from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import Response

from ..toolsets import describe_origin
from .auth import authenticate
from .errors import ApiError, JSONResponse
from .state import server_of
from .traces import trace_template

#: how many failed executions the view lists, newest first
RECENT_ERRORS = 20


def _prompt_text(prompt: Any) -> Any:
    text = getattr(prompt, "prompt", None)
    if isinstance(text, str) or text is None:
        return text
    try:
        return [part.model_dump(mode="json") if hasattr(part, "model_dump") else part for part in text]
    except TypeError:
        return str(text)


async def _side(rt: Any, agent: Any, side: Literal["a", "b"], namespace: str | None) -> dict[str, Any]:
    try:
        setup = await rt.side_setup(agent, side, namespace)
    except Exception as exc:  # a broken definition is shown, not hidden behind a 500
        return {"side": side, "error": str(exc)}
    model = setup.model
    return {
        "side": side,
        "prompt": {"name": setup.prompt.name, "text": _prompt_text(setup.prompt)},
        "model": {"name": model.name, "provider": model.provider, "model": model.model,
                  "fallbacks": [m.name for m in setup.fallbacks]},
        "tools": [{"name": name, "origin": tool.origin, "originDetail": tool.origin_detail,
                   "describedOrigin": describe_origin(tool), "session": setup.toolbox.session.get(name),
                   "needsApproval": bool(getattr(tool, "needs_approval", False)),
                   "declares": tool.declarations() if hasattr(tool, "declarations") else {}}
                  for name, tool in setup.toolbox.tools.items()],
        "hooks": [{"hook": name, "id": active.definition.id} for name, actives in setup.hooks.by_name.items()
                  for active in actives],
    }


async def _agents(rt: Any) -> list[dict[str, Any]]:
    out = []
    for entry in rt.registry.entries("agents"):
        agent = await rt.registry.aget("agents", entry.name, entry.package)
        sides = []
        if agent.side_a is not None:
            sides.append(await _side(rt, agent, "a", entry.package))
        if agent.side_b is not None:
            sides.append(await _side(rt, agent, "b", entry.package))
        out.append({"name": rt.registry.public_name(entry), "type": agent.type, "primary": agent.primary,
                    "description": agent.description, "package": entry.package, "sides": sides,
                    "allowOverrides": agent.allow_overrides})
    out.sort(key=lambda a: a["name"])
    return out


async def _models(rt: Any) -> list[dict[str, Any]]:
    """Every model definition a turn may be re-run with, by the name a request gives (a
    package's own as ``package/name``: only that package's agents may use them)."""
    out = []
    for entry in rt.registry.all_entries("models"):
        name = entry.name if entry.package is None else f"{entry.package}/{entry.name}"
        try:
            model = await rt.registry.aget("models", name, entry.package)
        except Exception as exc:  # a broken definition is shown, not hidden behind a 500
            out.append({"name": name, "package": entry.package, "error": str(exc)})
            continue
        out.append({"name": name, "provider": model.provider, "model": model.model, "package": entry.package})
    out.sort(key=lambda m: m["name"])
    return out


def _execution(record: Any) -> dict[str, Any]:
    return {"id": record.id, "threadId": record.thread_id, "status": record.status, "side": record.side,
            "steps": record.step_count, "error": record.error, "createdAt": record.created_at,
            "updatedAt": record.updated_at}


async def runtime_view(request: Request) -> Response:
    """The whole runtime view; 403 for a caller who is not an admin."""
    caller = await authenticate(request)
    if not caller.is_admin:
        raise ApiError(403, "only an admin may read the runtime view")
    rt = server_of(request).runtime
    store = rt.store
    running = await store.list_executions(status="running")
    approvals = []
    waiting_threads = dict.fromkeys(r.thread_id for r in await store.list_executions(status="waiting"))
    for thread_id in waiting_threads:
        for item in await rt.pending_approvals(thread_id):
            approvals.append({key: value for key, value in item.items() if key not in ("token", "stateToken")} | {"threadId": thread_id})
    effects = await store.list_effects(status="pending")
    failed = sorted(await store.list_executions(status="error"), key=lambda r: r.updated_at, reverse=True)
    from .api import effect_dict

    return JSONResponse({
        "agents": await _agents(rt),
        "models": await _models(rt),
        "traceUrl": trace_template(),
        "running": [_execution(r) for r in running],
        "approvals": approvals,
        "effects": [effect_dict(e) for e in effects],
        "errors": [_execution(r) for r in failed[:RECENT_ERRORS]],
    })
