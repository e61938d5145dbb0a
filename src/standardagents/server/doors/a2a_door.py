"""The A2A door: each primary agent is an A2A agent, built on the ``a2a-sdk`` server parts.

- ``GET /.well-known/agent-card.json``: a card whose skills are every primary agent, served
  at ``/a2a`` (a message goes to the agent named by its ``agent`` metadata, else the first).
- ``/a2a/{agent}/jsonrpc``: one agent, its URL (the card's). A client given it, with or
  without a trailing slash, finds the card whether it appends ``/.well-known/agent-card.json``
  (the Python client) or resolves ``.well-known/agent-card.json`` against it (the JavaScript
  client: ``/a2a/{agent}/.well-known/agent-card.json`` without the slash). ``/a2a/{agent}``
  and ``/a2a/{agent}/`` answer as well (the JavaScript client needs the slash there).
  Cards carry ``Cache-Control``, ``ETag`` and ``Last-Modified``; a revalidation whose
  ``If-None-Match`` (or, without one, ``If-Modified-Since``) still holds gets 304.
- JSON-RPC at those URLs (A2A 1.0 method names, and 0.3's ``message/send``,
  ``message/stream``, ``tasks/get``, ``tasks/cancel``): an A2A task is our execution (same id),
  its ``contextId`` our thread (an unknown id names a new thread). A pause for approval is
  ``input-required``; the next message on that task decides every waiting call (a data part
  ``{"approved": bool, "reason"?}``, or text: ``yes``/``approve`` approves, anything else
  denies with the text as the reason) and the same execution continues. Parameters the SDK
  would misread (an unknown ``ListTasks`` status, which it takes as no filter) or answer
  with the wrong code (0.3 parameters: ``-32600``) are refused here with ``-32602``.

Bearer tokens and dev mode as the REST API; a caller sees only its own threads and tasks.
Push notifications (``tasks/pushNotificationConfig/*``, or the config of a ``message/send``)
go through the webhook outbox (see a2a_push): durable, retried, with no internal addresses
unless allowed, and the config's ``token`` in ``X-A2A-Notification-Token``.
Tasks are kept in the store (see a2a_tasks): ``tasks/get``, ``tasks/cancel`` and
``tasks/resubscribe`` answer on any worker and after a restart; tasks that ended are deleted
after a retention (``STANDARDAGENTS_A2A_TASK_RETENTION``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import email.utils
import hashlib
import json
import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ...engine.options import TurnRequest
from ...exceptions import QuotaExceeded
from ...store.base import UserRecord
from ..auth import authenticate
from ..errors import ApiError, JSONResponse
from ..state import server_of
from ..streams import turn_events
from .common import (
    DoorError,
    agent_description,
    decide_calls,
    open_thread,
    primary_agents,
    quota_refusal,
    turn_failure,
)

if TYPE_CHECKING:
    from ...engine.runtime import Runtime

__all__ = ["a2a_routes"]

_CALLER_KEY = "standardagents_caller"
_AGENT_KEY = "standardagents_agent"
_YES = {"y", "yes", "approve", "approved", "ok", "allow", "true"}
#: how long a client may use a card without asking again (seconds); a --dev server, whose
#: agents change as their files do, has clients revalidate every time
CARD_MAX_AGE = 300
#: the last segment of an agent's URL
_BINDING = "jsonrpc"


def _sdk() -> Any:
    try:
        import a2a.server
    except ImportError:  # an optional extra
        raise ApiError(501, "the A2A door needs the a2a-sdk package: pip install 'standardagents[a2a]'") from None
    import a2a

    return a2a


def _executor(rt: Runtime, following: set[str]) -> Any:
    from a2a.helpers.proto_helpers import get_data_parts, new_data_part, new_text_part
    from a2a.server.agent_execution import AgentExecutor
    from a2a.server.tasks import TaskUpdater
    from a2a.types import Task, TaskState, TaskStatus

    class Executor(AgentExecutor):
        """Runs a turn for a task: starts it (or decides its approvals) and reports it."""

        async def execute(self, context: Any, event_queue: Any) -> None:
            following.add(context.task_id)
            try:
                await self._execute(context, event_queue)
            finally:
                following.discard(context.task_id)

        async def _execute(self, context: Any, event_queue: Any) -> None:
            caller: UserRecord = context.call_context.state[_CALLER_KEY]
            agent: str = context.call_context.state[_AGENT_KEY]
            task_id, context_id = context.task_id, context.context_id
            updater = TaskUpdater(event_queue, task_id, context_id)
            current = context.current_task
            if current is None:
                await event_queue.enqueue_event(Task(id=task_id, context_id=context_id, history=[context.message],
                                                     status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)))
            try:
                thread = await open_thread(rt, caller, agent, context_id, "a2a", create=True)
            except DoorError as exc:
                await updater.reject(updater.new_agent_message([new_text_part(exc.message)]))
                return
            text = context.get_user_input()
            if current is not None and current.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
                data = [d for d in get_data_parts(context.message.parts) if isinstance(d, dict)]
                if data and isinstance(data[0].get("approved"), bool):
                    approved, reason = data[0]["approved"], data[0].get("reason")
                else:
                    approved = text.strip().lower().rstrip(".!") in _YES
                    reason = None if approved else (text.strip() or None)
                tokens = [p["token"] for p in await rt.pending_approvals(thread.id)]
                decided = await decide_calls(rt, thread.id, [(t, approved, reason) for t in tokens], caller)
                if decided is None:
                    await updater.failed(updater.new_agent_message([new_text_part("nothing waits for a decision")]))
                    return
                sub, resumed = decided
                await self._follow(updater, sub, resumed, thread.id, task_id)
                return
            if not text.strip():
                await updater.reject(updater.new_agent_message([new_text_part("send a text part")]))
                return
            sub = rt.subscribe(thread.id, reasoning=False)
            try:
                task = (await rt.begin(thread.id, TurnRequest(content=text, execution_id=task_id))).task
            except QuotaExceeded as exc:  # over the caller's quota: rejected, saying when to retry
                sub.close()
                await updater.reject(updater.new_agent_message([
                    new_text_part(quota_refusal(exc)),
                    new_data_part({"code": "quota_exceeded", "retryAfter": exc.retry_after})]))
                return
            except BaseException:
                sub.close()
                raise
            await self._follow(updater, sub, task, thread.id, task_id)

        async def _follow(self, updater: Any, sub: Any, task: asyncio.Task[Any], thread_id: str,
                          execution_id: str) -> None:
            await updater.start_work()
            try:
                async for event in turn_events(sub, task, rt, thread_id, execution_id):
                    if event.type == "tool_call_started":
                        note = f"calling {event.data.get('name')}"
                        await updater.update_status(TaskState.TASK_STATE_WORKING,
                                                    updater.new_agent_message([new_text_part(note)]))
                result = await task
            except BaseException:
                with contextlib.suppress(BaseException):  # this task's turn, not another client's
                    await asyncio.shield(rt.cancel(execution_id))
                raise
            if result.outcome == "approval_required":
                pending = await rt.pending_approvals(thread_id)
                calls = [{"tool": p.get("tool"), "arguments": p.get("arguments"), "id": p.get("id")} for p in pending]
                note = ("waiting for approval: " + ", ".join(str(c["tool"]) for c in calls)
                        + " (reply 'yes' to approve, anything else denies)")
                await updater.requires_input(updater.new_agent_message(
                    [new_text_part(note), new_data_part({"approvals": calls})]))
            elif result.stop_reason == "cancelled":
                await updater.cancel()
            elif (failure := turn_failure(result.outcome, result.stop_reason, result.error, result.payload,
                                          bool(result.text))) is not None:
                await updater.failed(updater.new_agent_message(
                    [new_text_part(failure.message), new_data_part({"code": failure.code, "status": failure.status})]))
            elif result.stop_reason == "error" or result.outcome == "error":
                await updater.failed(updater.new_agent_message([new_text_part(result.error or "the agent failed")]))
            else:
                reply = result.text or ""
                parts = [new_text_part(reply)]
                if result.value is not None:
                    from ...engine.output import to_jsonable

                    # a typed answer (a pydantic model, a dataclass...) as the JSON it stands for
                    parts.append(new_data_part(to_jsonable(result.value)))
                await updater.add_artifact(parts, name="reply")
                await updater.complete(updater.new_agent_message([new_text_part(reply)]))

        async def cancel(self, context: Any, event_queue: Any) -> None:
            from .a2a_tasks import end_execution

            await end_execution(rt, context.task_id)
            updater = TaskUpdater(event_queue, context.task_id, context.context_id)
            await updater.cancel()

    return Executor()


def _card(agents: list[tuple[str, Any]], base: str, name: str, description: str, url: str) -> Any:
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        HTTPAuthSecurityScheme,
        SecurityRequirement,
        SecurityScheme,
        StringList,
    )

    from ... import __version__

    skills = [AgentSkill(id=agent_name, name=agent_name, description=agent_description(agent_name, agent),
                         tags=["agent"]) for agent_name, agent in agents]
    return AgentCard(
        name=name, description=description, version=__version__,
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        security_schemes={"bearer": SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer"))},
        security_requirements=[SecurityRequirement(schemes={"bearer": StringList()})],
        default_input_modes=["text/plain", "application/json"], default_output_modes=["text/plain", "application/json"],
        skills=skills)


async def _cards(request: Request, agent: str | None) -> tuple[Any, list[tuple[str, Any]]]:
    rt = server_of(request).runtime
    agents = await primary_agents(rt)
    base = str(request.base_url).rstrip("/")
    if agent is None:
        if not agents:
            raise ApiError(404, "this project has no primary agent")
        return _card(agents, base, "standardagents", "The project's agents; the 'agent' metadata of a message "
                     "picks one (default: the first skill).", f"{base}/a2a"), agents
    chosen = [(n, a) for n, a in agents if n == agent]
    if not chosen:
        raise ApiError(404, f"unknown agent {agent!r}")
    url = f"{base}/a2a/{agent}/{_BINDING}"
    return _card(chosen, base, agent, agent_description(agent, chosen[0][1]), url), chosen


async def agent_card(request: Request) -> Response:
    """The A2A agent card (public, as A2A discovery expects), with the HTTP caching headers
    the A2A spec asks of card endpoints; a revalidation of an unchanged card gets 304."""
    _sdk()
    from a2a.server.request_handlers.response_helpers import agent_card_to_dict

    card, _ = await _cards(request, request.path_params.get("agent"))
    body = json.dumps(agent_card_to_dict(card), ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()
    etag = f'"{hashlib.sha256(body).hexdigest()[:32]}"'
    server = server_of(request)
    first_seen: collections.OrderedDict[str, float] = server.extra.setdefault("a2a_card_seen",
                                                                             collections.OrderedDict())
    seen = first_seen.setdefault(etag, time.time())
    while len(first_seen) > 64:  # cards differ by the Host asked for: keep a bounded few
        first_seen.popitem(last=False)
    headers = {"ETag": etag, "Last-Modified": email.utils.formatdate(seen, usegmt=True),
               "Cache-Control": "no-cache" if server.dev else f"public, max-age={CARD_MAX_AGE}"}
    if _still_fresh(request, etag, seen):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


def _still_fresh(request: Request, etag: str, seen: float) -> bool:
    """Whether the client's copy is the card (RFC 9110: ``If-None-Match``, weak comparison;
    ``If-Modified-Since`` only without it)."""
    match = request.headers.get("if-none-match")
    if match is not None:
        tags = {tag.strip().removeprefix("W/") for tag in match.split(",")}
        return "*" in tags or etag in tags
    since = request.headers.get("if-modified-since")
    if since is None:
        return False
    try:
        when = email.utils.parsedate_to_datetime(since)
    except (TypeError, ValueError):
        return False
    return when.tzinfo is not None and int(seen) <= when.timestamp()


async def no_agent_card(request: Request) -> Response:
    """``/a2a/.well-known/agent-card.json``: where a client that resolves the card's path
    against ``/a2a/{agent}`` (no trailing slash) looks. The agent cannot be told from that
    URL, so the answer is a 404 saying which URL to use, never another agent's card."""
    raise ApiError(404, f"no agent is named by this URL: give a client /a2a/{{agent}}/{_BINDING} "
                        "(or /a2a/{agent}/ with a trailing slash); the project's card is /.well-known/agent-card.json")


def _dispatcher(request: Request, card: Any) -> Any:
    """The JSON-RPC dispatcher of this app (one for all agents: the agent travels in the
    call context), made on first use."""
    server = server_of(request)
    found = server.extra.get("a2a_dispatcher")
    if found is not None:
        return found
    from a2a.auth.user import User
    from a2a.server.context import ServerCallContext
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes.common import ServerCallContextBuilder
    from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher

    from .a2a_push import OutboxPushSender, StorePushConfigStore, push_url_allowed
    from .a2a_tasks import BusTaskEventStream, StoreTaskStore, retention_from_env

    class Caller(User):
        """An authenticated A2A user: the SDK scopes tasks by our user id."""

        def __init__(self, user: UserRecord) -> None:
            self.user = user

        @property
        def is_authenticated(self) -> bool:
            return True

        @property
        def user_name(self) -> str:
            return self.user.id

    class Builder(ServerCallContextBuilder):
        def build(self, req: Request) -> ServerCallContext:
            caller: UserRecord = req.scope["state"][_CALLER_KEY]
            return ServerCallContext(user=Caller(caller),
                                     state={_CALLER_KEY: caller, _AGENT_KEY: req.scope["state"][_AGENT_KEY],
                                            "headers": dict(req.headers)})

    following: set[str] = set()
    handler = DefaultRequestHandler(agent_executor=_executor(server.runtime, following),
                                    task_store=StoreTaskStore(server.runtime, following,
                                                              retention=retention_from_env()),
                                    agent_card=card,
                                    event_stream=BusTaskEventStream(server.runtime),
                                    push_config_store=StorePushConfigStore(server.runtime),
                                    push_sender=OutboxPushSender(server.runtime),
                                    push_url_validator=push_url_allowed)
    dispatcher = JsonRpcDispatcher(request_handler=handler, context_builder=Builder(), enable_v0_3_compat=True)
    server.extra["a2a_dispatcher"] = dispatcher
    return dispatcher


async def rpc(request: Request) -> Response:
    """A2A JSON-RPC for one agent (``/a2a/{agent}/jsonrpc``, ``/a2a/{agent}``) or the project
    card's default (``/a2a``)."""
    caller = await authenticate(request)
    _sdk()
    agent = request.path_params.get("agent")
    rt = server_of(request).runtime
    body: Any = None
    with contextlib.suppress(Exception):  # not JSON: the SDK answers that
        body = await request.json()
    if agent is None:
        agents = await primary_agents(rt)
        if not agents:
            raise ApiError(404, "this project has no primary agent")
        agent = agents[0][0]
        with contextlib.suppress(Exception):
            meta = (body.get("params") or {}).get("message", {}).get("metadata") or {}
            if isinstance(meta.get("agent"), str):
                agent = meta["agent"]
    elif agent not in [n for n, _ in await primary_agents(rt)]:
        raise ApiError(404, f"unknown agent {agent!r}")
    refused = _invalid_params(body)
    if refused is not None:
        return JSONResponse(refused)
    request.scope.setdefault("state", {})[_CALLER_KEY] = caller
    request.scope["state"][_AGENT_KEY] = agent
    card, _ = await _cards(request, None)
    response: Response = await _dispatcher(request, card).handle_requests(request)
    return response


def _invalid_params(body: Any) -> dict[str, Any] | None:
    """The JSON-RPC error answering parameters the SDK would take wrongly, else ``None``: a
    ``ListTasks`` status that is no task state (its parser makes it "no filter", listing
    every task) and 0.3 parameters that do not validate (its 0.3 adapter answers ``-32600``,
    the code of a malformed request, not ``-32602``)."""
    if not isinstance(body, dict) or body.get("jsonrpc") != "2.0" or not isinstance(body.get("method"), str):
        return None
    method, params, request_id = body["method"], body.get("params"), body.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        request_id = None
    if method == "ListTasks" and isinstance(params, dict) and params.get("status") is not None:
        from a2a.server.request_handlers.response_helpers import build_error_response
        from a2a.types import TaskState
        from a2a.utils.errors import InvalidParamsError

        status = params["status"]
        if isinstance(status, bool) or not (status in TaskState.keys() if isinstance(status, str)
                                            else isinstance(status, int) and status in TaskState.values()):
            names = ", ".join(name for name in TaskState.keys() if name != "TASK_STATE_UNSPECIFIED")
            return build_error_response(request_id, InvalidParamsError(
                f"Invalid params: status {status!r} is not a task state (one of {names})"))
        return None
    import a2a.server.routes  # noqa: F401 - before the adapter, which imports it back (a cycle)
    from a2a.compat.v0_3.jsonrpc_adapter import JSONRPC03Adapter
    from pydantic import ValidationError

    model = JSONRPC03Adapter.METHOD_TO_MODEL.get(method)
    if model is None or ("params" in body and not isinstance(params, dict | list)):
        return None  # params that are no structure make the request malformed: the SDK says so
    try:
        model.model_validate(body)  # type: ignore[attr-defined]
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        if not all(error["loc"][:1] == ("params",) for error in errors):
            return None  # the request itself is malformed: the SDK answers -32600
        from a2a.server.jsonrpc_models import InvalidParamsError as InvalidParams

        said = "; ".join(f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}" for error in errors)
        return {"jsonrpc": "2.0", "id": request_id,
                "error": InvalidParams(message=f"Invalid params: {said}", data=said).model_dump(by_alias=True)}
    return None


def a2a_routes() -> list[BaseRoute]:
    """The door's routes (see the module docstring for which URL is which)."""
    cards = ["/.well-known/agent-card.json", "/a2a/{agent}/.well-known/agent-card.json",
             f"/a2a/{{agent}}/{_BINDING}/.well-known/agent-card.json"]
    calls = ["/a2a", "/a2a/", "/a2a/{agent}", "/a2a/{agent}/", f"/a2a/{{agent}}/{_BINDING}",
             f"/a2a/{{agent}}/{_BINDING}/"]
    return [
        *(Route(path, agent_card, methods=["GET"]) for path in cards),
        Route("/a2a/.well-known/agent-card.json", no_agent_card, methods=["GET"]),
        *(Route(path, rpc, methods=["POST"]) for path in calls),
    ]
