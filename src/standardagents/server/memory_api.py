"""Memory over HTTP, in the shape clients of LangGraph's store speak (``/api/store/...``),
and ``DELETE /api/users/{id}/data``, which forgets a user everywhere (admins only).

A user's memory is theirs: a caller who is not an admin reaches only namespaces that start
with ``["user", <their id>]`` (a search without a prefix searches there); admins reach all.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..definitions.authorization import AuthorizationAction
from ..forget import forget_user
from ..memory import (
    EmbedderError,
    MemoryInputError,
    MemoryRejected,
    MemoryStore,
    WrittenBy,
)
from ..memory._namespace import check_namespace, parse_dotted
from ..store.base import UserRecord
from .auth import authenticate
from .authorization import memory_allowed
from .errors import ApiError, JSONResponse, read_json
from .state import server_of

__all__ = ["MEMORY_EMBEDDER_ENV", "announce_memory", "memory_routes", "server_memory"]

log = logging.getLogger("standardagents.memory")

#: the embedder the server's memory uses: ``offline`` (default), ``openai:<model>`` or an
#: embedding model definition as JSON (``{"provider": "openai", "model": ..., "baseUrl": ...}``)
MEMORY_EMBEDDER_ENV = "STANDARDAGENTS_MEMORY_EMBEDDER"


def _embedder_spec() -> Any:
    spec = os.environ.get(MEMORY_EMBEDDER_ENV) or "offline"
    return json.loads(spec) if spec.startswith("{") else spec  # JSON: an embedding model definition


async def server_memory(request: Request) -> MemoryStore:
    """The server's memory store, opened on first use (on the runtime's database)."""
    server = server_of(request)
    memory: MemoryStore | None = server.extra.get("memory")
    if memory is None:
        from ..memory.agents import memory_for

        try:
            memory = await memory_for(server.runtime, _embedder_spec())
        except (EmbedderError, ValueError) as exc:
            raise ApiError(503, f"{MEMORY_EMBEDDER_ENV} does not name a usable embedder: {exc}",
                           code="embedder_unavailable") from None
        server.extra["memory"] = memory
    return memory


async def _reach(request: Request, caller: UserRecord, namespace: tuple[str, ...], action: AuthorizationAction,
                 *, prefix: bool = False) -> tuple[str, ...]:
    """:func:`_bound`, asked of the project's authorization handler too (it may open another
    namespace to the caller, or close the caller's own)."""
    try:
        bound, refusal = _bound(caller, namespace, prefix=prefix), None
    except ApiError as exc:
        bound, refusal = namespace, exc
    if await memory_allowed(server_of(request).runtime, caller, bound, action, refusal is None):
        return bound
    raise refusal or ApiError(403, f"you may not {action} memory namespace {list(bound)!r} (the authorization "
                                   "policy does not grant it)")


async def announce_memory(runtime: Any) -> None:
    """At start-up, when an agent of the project uses memory: open the memory store so the log
    says which vector search it runs on, and warns when it falls back to an exact scan."""
    # only agents already loaded are asked: a packed agent loads on first use (its memory store
    # then opens, and says the same, when it is first needed)
    agents = [entry.value for entry in runtime.registry.entries("agents") if entry.loader is None]
    if not any(getattr(agent, "memory", None) is not None for agent in agents):
        return
    from ..memory.agents import memory_for

    try:
        await memory_for(runtime, _embedder_spec())
    except Exception as exc:  # the server still serves; memory says what is wrong when used
        log.warning("memory: could not open the memory store at start-up: %s", exc)


def _bound(caller: UserRecord, namespace: tuple[str, ...], *, prefix: bool = False) -> tuple[str, ...]:
    """``namespace`` if the caller may reach it (403 otherwise); an empty prefix becomes theirs."""
    if caller.is_admin:
        return namespace
    own = ("user", caller.id)
    if prefix and not namespace:
        return own
    if namespace[:2] != own[: len(namespace[:2])] or (len(namespace) < 2 and not prefix):
        raise ApiError(403, f"namespace {list(namespace)!r} is not yours: your memory lives under "
                            f"[\"user\", {caller.id!r}, ...]")
    return namespace if len(namespace) >= 2 else own


async def _call(coro: Any) -> Any:
    try:
        return await coro
    except MemoryInputError as exc:
        raise ApiError(422, str(exc)) from None
    except MemoryRejected as exc:
        raise ApiError(422, f"not stored: {exc.reason}", code="memory_rejected") from None
    except EmbedderError as exc:
        raise ApiError(503, str(exc), code="embedder_unavailable") from None


def _namespace(body: dict[str, Any], key: str, *, allow_empty: bool = False) -> tuple[str, ...]:
    try:
        return check_namespace(body.get(key, [] if allow_empty else None), field=key, allow_empty=allow_empty)
    except MemoryInputError as exc:
        raise ApiError(422, str(exc)) from None


async def put_item(request: Request) -> Response:
    caller = await authenticate(request)
    body = await read_json(request)
    namespace = await _reach(request, caller, _namespace(body, "namespace"), "write")
    index = body.get("index")
    if index is not None and index is not False and not isinstance(index, list):
        raise ApiError(422, f"field 'index' must be false or a list of field paths, not {index!r}")
    memory = await server_memory(request)
    key: Any = body.get("key")
    value: Any = body.get("value")
    await _call(memory.put(namespace, key, value, index=index, ttl=body.get("ttl"),
                           written_by=WrittenBy(user_id=caller.id)))
    return Response(status_code=204)


def _flag(raw: str | None, name: str) -> bool | None:
    """A query parameter's ``true`` / ``false`` (absent: None, the store's default)."""
    if raw is None or raw == "":
        return None
    flag = {"true": True, "1": True, "false": False, "0": False}.get(raw.strip().lower())
    if flag is None:
        raise ApiError(422, f"query parameter {name!r} must be true or false, not {raw[:40]!r}")
    return flag


async def get_item(request: Request) -> Response:
    caller = await authenticate(request)
    try:
        namespace = parse_dotted(request.query_params.get("namespace", ""))
    except MemoryInputError as exc:
        raise ApiError(422, str(exc)) from None
    key = request.query_params.get("key") or ""
    refresh = _flag(request.query_params.get("refresh_ttl"), "refresh_ttl")
    memory = await server_memory(request)
    item = await _call(memory.get(await _reach(request, caller, namespace, "read"), key, refresh_ttl=refresh))
    if item is None:
        raise ApiError(404, f"no item {key!r} in namespace {list(namespace)!r}")
    return JSONResponse(item.to_dict())


async def delete_item(request: Request) -> Response:
    caller = await authenticate(request)
    body = await read_json(request)
    namespace = await _reach(request, caller, _namespace(body, "namespace"), "delete")
    memory = await server_memory(request)
    key: Any = body.get("key")
    await _call(memory.delete(namespace, key))
    return Response(status_code=204)


async def search_items(request: Request) -> Response:
    caller = await authenticate(request)
    body = await read_json(request, required=False)
    prefix = await _reach(request, caller, _namespace(body, "namespace_prefix", allow_empty=True), "read", prefix=True)
    memory = await server_memory(request)
    items = await _call(memory.search(prefix, query=body.get("query"), filter=body.get("filter"),
                                      limit=body.get("limit", 10), offset=body.get("offset", 0),
                                      refresh_ttl=body.get("refresh_ttl")))
    return JSONResponse({"items": [i.to_dict() for i in items]})


async def list_namespaces(request: Request) -> Response:
    caller = await authenticate(request)
    body = await read_json(request, required=False)
    prefix = await _reach(request, caller, _namespace(body, "prefix", allow_empty=True), "list", prefix=True)
    suffix = _namespace(body, "suffix", allow_empty=True)
    memory = await server_memory(request)
    found = await _call(memory.list_namespaces(prefix, suffix=suffix, max_depth=body.get("max_depth"),
                                               limit=body.get("limit", 100), offset=body.get("offset", 0)))
    return JSONResponse({"namespaces": [list(ns) for ns in found]})


async def forget_user_data(request: Request) -> Response:
    caller = await authenticate(request)
    if not caller.is_admin:
        raise ApiError(403, "only an admin may forget a user's data")
    user_id = request.path_params["user_id"]
    server = server_of(request)
    runtime = server.runtime
    if await runtime.store.get_user(user_id) is None:
        raise ApiError(404, f"unknown user {user_id!r}")
    report = await forget_user(runtime.store, user_id, runtime=runtime, event_log=server.event_log,
                               relay=server.extra.get("relay"))
    return JSONResponse(report.to_dict())


def memory_routes(prefix: str) -> list[BaseRoute]:
    store = f"{prefix}/store"
    return [
        Route(f"{store}/items", put_item, methods=["PUT"]),
        Route(f"{store}/items", get_item, methods=["GET"]),
        Route(f"{store}/items", delete_item, methods=["DELETE"]),
        Route(f"{store}/items/search", search_items, methods=["POST"]),
        Route(f"{store}/namespaces", list_namespaces, methods=["POST"]),
        Route(f"{prefix}/users/{{user_id}}/data", forget_user_data, methods=["DELETE"]),
    ]
