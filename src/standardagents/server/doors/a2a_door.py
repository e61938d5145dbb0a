"""The A2A door: each primary agent is an A2A agent, built on the ``a2a-sdk`` server parts.

- ``GET /.well-known/agent-card.json``: a card whose skills are every primary agent, served
  at ``/a2a`` (a message goes to the agent named by its ``agent`` metadata, else the first);
  ``GET /a2a/{agent}/.well-known/agent-card.json``: one agent's card, served at
  ``/a2a/{agent}``.
- JSON-RPC at those URLs (A2A 1.0 method names, and 0.3's ``message/send``,
  ``message/stream``, ``tasks/get``, ``tasks/cancel``): an A2A task is our execution (same id),
  its ``contextId`` our thread (an unknown id names a new thread). A pause for approval is
  ``input-required``; the next message on that task decides every waiting call (a data part
  ``{"approved": bool, "reason"?}``, or text: ``yes``/``approve`` approves, anything else
  denies with the text as the reason) and the same execution continues.

Bearer tokens and dev mode as the REST API; a caller sees only its own threads and tasks.
Tasks are kept in the store (see a2a_tasks): ``tasks/get``, ``tasks/cancel`` and
``tasks/resubscribe`` answer on any worker and after a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

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
    turn_failure,
)

if TYPE_CHECKING:
    from ...engine.runtime import Runtime

__all__ = ["a2a_routes"]

_CALLER_KEY = "standardagents_caller"
_AGENT_KEY = "standardagents_agent"
_YES = {"y", "yes", "approve", "approved", "ok", "allow", "true"}


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
                decided = await decide_calls(rt, thread.id, [(t, approved, reason) for t in tokens])
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
                task = await rt.start(thread.id, text, execution_id=task_id)
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
                with contextlib.suppress(BaseException):
                    await asyncio.shield(rt.stop(thread_id))
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
        capabilities=AgentCapabilities(streaming=True),
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
    return _card(chosen, base, agent, agent_description(agent, chosen[0][1]), f"{base}/a2a/{agent}"), chosen


async def agent_card(request: Request) -> Response:
    """The A2A agent card (public, as A2A discovery expects)."""
    _sdk()
    from a2a.server.request_handlers.response_helpers import agent_card_to_dict

    card, _ = await _cards(request, request.path_params.get("agent"))
    return JSONResponse(agent_card_to_dict(card))


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

    from .a2a_tasks import BusTaskEventStream, StoreTaskStore

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
                                    task_store=StoreTaskStore(server.runtime, following), agent_card=card,
                                    event_stream=BusTaskEventStream(server.runtime))
    dispatcher = JsonRpcDispatcher(request_handler=handler, context_builder=Builder(), enable_v0_3_compat=True)
    server.extra["a2a_dispatcher"] = dispatcher
    return dispatcher


async def rpc(request: Request) -> Response:
    """A2A JSON-RPC for one agent (``/a2a/{agent}``) or the project card's default (``/a2a``)."""
    caller = await authenticate(request)
    _sdk()
    agent = request.path_params.get("agent")
    rt = server_of(request).runtime
    if agent is None:
        agents = await primary_agents(rt)
        if not agents:
            raise ApiError(404, "this project has no primary agent")
        agent = agents[0][0]
        with contextlib.suppress(Exception):
            body = await request.json()
            meta = (body.get("params") or {}).get("message", {}).get("metadata") or {}
            if isinstance(meta.get("agent"), str):
                agent = meta["agent"]
    elif agent not in [n for n, _ in await primary_agents(rt)]:
        raise ApiError(404, f"unknown agent {agent!r}")
    request.scope.setdefault("state", {})[_CALLER_KEY] = caller
    request.scope["state"][_AGENT_KEY] = agent
    card, _ = await _cards(request, None)
    response: Response = await _dispatcher(request, card).handle_requests(request)
    return response


def a2a_routes() -> list[BaseRoute]:
    return [
        Route("/.well-known/agent-card.json", agent_card, methods=["GET"]),
        Route("/a2a/{agent}/.well-known/agent-card.json", agent_card, methods=["GET"]),
        Route("/a2a", rpc, methods=["POST"]),
        Route("/a2a/{agent}", rpc, methods=["POST"]),
    ]
