"""The AG-UI door: ``POST /ag-ui/{agent}`` runs a turn and streams it as AG-UI events (SSE),
so front-end kits speaking AG-UI can drive an agent.

The request is AG-UI's ``RunAgentInput``. Its ``threadId`` is our thread: an existing thread
of the caller's (same access policy as the REST API), or, when unknown, the id of a new one.
The thread keeps the history, so only the last user message of ``messages`` is sent. A run
ends with exactly one ``RUN_FINISHED`` (``outcome`` success, ``interrupt`` for an approval
pause, ``cancelled``) or ``RUN_ERROR``. Models come from the ``ag-ui-protocol`` package
(``pip install 'standardagents[agui]'``).

The input's ``tools`` are front-end tools, i.e. client tools (engine/client_tools): the
agent's model sees them beside its own tools; a call of one is streamed as
``TOOL_CALL_START/ARGS/END`` and the run finishes while the execution waits durably. A run
whose ``messages`` end with the ``tool`` messages answering those calls continues that same
execution. A ``STATE_SNAPSHOT`` opens and closes every run: the thread, agent, execution,
its status (and what it waits for), and at the end its usage and typed value.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ...engine.client_tools import ClientToolError, ClientTools, client_tools
from ...engine.options import TurnOptions, TurnRequest
from ...engine.output import to_jsonable
from ...events import Event
from ...exceptions import QuotaExceeded
from ...records import new_id
from ..auth import authenticate
from ..errors import ApiError, read_json
from ..state import server_of
from ..streams import sse_response, turn_events
from .common import (
    DoorError,
    Turn,
    decide_calls,
    open_thread,
    quota_refusal,
    start_turn,
    turn_failure,
)

if TYPE_CHECKING:
    from ag_ui.core import BaseEvent

__all__ = ["agui_routes"]


def _models() -> Any:
    try:
        import ag_ui.core as core
    except ImportError:  # an optional extra
        raise ApiError(501, "the AG-UI door needs the ag-ui-protocol package: pip install 'standardagents[agui]'") from None
    return core


def _last_user_text(run_input: Any) -> str | None:
    for message in reversed(run_input.messages):
        if getattr(message, "role", None) != "user":
            continue
        content = message.content
        if isinstance(content, str):
            return content
        texts = [getattr(part, "text", None) for part in content or []]
        joined = "".join(t for t in texts if isinstance(t, str))
        return joined or None
    return None


def _front_end_tools(run_input: Any) -> ClientTools | None:
    """The input's front-end tools as the turn's client tools (None when it sends none)."""
    if not run_input.tools:
        return None
    schemas = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                 "parameters": t.parameters or {"type": "object", "properties": {}}}}
               for t in run_input.tools]
    return client_tools(schemas)


def _tool_results(run_input: Any) -> dict[str, str]:
    """The trailing ``tool`` messages of the input (the answers to front-end tool calls):
    call id -> result text (an ``error`` is reported to the model as such)."""
    out: dict[str, str] = {}
    for message in reversed(run_input.messages):
        if getattr(message, "role", None) != "tool":
            break
        error = getattr(message, "error", None)
        out[message.tool_call_id] = f"error: {error}" if error else str(message.content or "")
    return dict(reversed(out.items()))


def _status(done: dict[str, Any]) -> dict[str, Any]:
    """An execution's status in the snapshot, from its ``done`` event."""
    outcome, stop = done.get("outcome"), done.get("stopReason")
    if outcome == "client_tool_calls":
        return {"status": "waiting", "waitingFor": "client_tools"}
    if outcome == "approval_required":
        return {"status": "waiting", "waitingFor": "approval"}
    if stop == "cancelled":
        return {"status": "cancelled"}
    if stop == "error" or _failure(done) is not None:
        return {"status": "failed"}
    return {"status": "complete"}


def _failure(done: dict[str, Any]) -> Any:
    """The shared classification of a finished run (a guardrail, a usage limit, a model that
    failed, an answer that never matched the output type), from its ``done`` event."""
    return turn_failure(done.get("outcome"), done.get("stopReason"), done.get("error"), done.get("payload"), False)


class _Translator:
    """Turns one execution's bus events into AG-UI events, keeping text messages, tool
    calls and steps properly opened and closed."""

    def __init__(self, core: Any, thread_id: str, run_id: str) -> None:
        self.core = core
        self.thread_id = thread_id
        self.run_id = run_id
        self.text: str | None = None
        self.tools: set[str] = set()
        self.step = 0
        self.step_open = False
        self.errors: list[str] = []
        self.pending: list[dict[str, Any]] = []
        #: front-end calls the client already knows (and answered): not streamed again
        self.answered: set[str] = set()
        #: the front-end tools' names: their calls are streamed once the run ends, under the
        #: ids the results must carry (the model's own ids may be replaced by unique ones)
        self.front_end: set[str] = set()

    def _open_step(self) -> list[BaseEvent]:
        if self.step_open:
            return []
        self.step += 1
        self.step_open = True
        return [self.core.StepStartedEvent(step_name=f"step {self.step}")]

    def _close_text(self) -> list[BaseEvent]:
        if self.text is None:
            return []
        message_id, self.text = self.text, None
        return [self.core.TextMessageEndEvent(message_id=message_id)]

    def close_all(self) -> list[BaseEvent]:
        out = self._close_text()
        out += [self.core.ToolCallEndEvent(tool_call_id=call) for call in sorted(self.tools)]
        self.tools.clear()
        if self.step_open:
            self.step_open = False
            out.append(self.core.StepFinishedEvent(step_name=f"step {self.step}"))
        return out

    def translate(self, event: Event) -> list[BaseEvent]:
        core, data = self.core, event.data
        out: list[BaseEvent] = []
        if event.type == "message_chunk" and data.get("delta"):
            out += self._open_step()
            message_id = str(data.get("messageId") or new_id("msg_"))
            if self.text != message_id:
                out += self._close_text()
                self.text = message_id
                out.append(core.TextMessageStartEvent(message_id=message_id, role="assistant"))
            out.append(core.TextMessageContentEvent(message_id=message_id, delta=str(data["delta"])))
        elif event.type in ("tool_call_started", "tool_call_done") and (
                data.get("id") in self.answered or (event.type == "tool_call_started" and data.get("name") in self.front_end)):
            pass
        elif event.type == "tool_call_started" and data.get("id"):
            out += self._open_step() + self._close_text()
            call = str(data["id"])
            if call not in self.tools:
                self.tools.add(call)
                out.append(core.ToolCallStartEvent(tool_call_id=call, tool_call_name=str(data.get("name") or "tool"),
                                                   parent_message_id=None))
        elif event.type == "tool_call_done" and data.get("id"):
            out += self._open_step() + self._close_text()
            call = str(data["id"])
            if call not in self.tools:
                out.append(core.ToolCallStartEvent(tool_call_id=call, tool_call_name=str(data.get("name") or "tool")))
            self.tools.discard(call)
            arguments = data.get("arguments")
            text_args = arguments if isinstance(arguments, str) else json.dumps(arguments, default=str)
            if text_args:
                out.append(core.ToolCallArgsEvent(tool_call_id=call, delta=text_args))
            out.append(core.ToolCallEndEvent(tool_call_id=call))
            result = data.get("result") if data.get("status") == "success" else (data.get("error") or data.get("result"))
            content = result if isinstance(result, str) else json.dumps(result, default=str)
            out.append(core.ToolCallResultEvent(message_id=new_id("msg_"), tool_call_id=call, content=content or "",
                                                role="tool"))
        elif event.type == "usage":
            out += self._close_text()
            if self.step_open:
                self.step_open = False
                out.append(core.StepFinishedEvent(step_name=f"step {self.step}"))
        elif event.type == "error":
            self.errors.append(str(data.get("message") or "error"))
        elif event.type == "approval.request":
            self.pending.append(dict(data))
        return out

    def client_calls(self, calls: list[dict[str, Any]]) -> list[BaseEvent]:
        """The front-end tool calls the run ends with: each opened (unless the model's stream
        opened it already), given its arguments and closed; the client runs them."""
        core = self.core
        out = self._close_text()
        for call in calls:
            call_id = str(call["id"])
            if call_id not in self.tools:
                out.append(core.ToolCallStartEvent(tool_call_id=call_id, tool_call_name=str(call["name"])))
            self.tools.discard(call_id)
            if call.get("arguments"):
                out.append(core.ToolCallArgsEvent(tool_call_id=call_id, delta=str(call["arguments"])))
            out.append(core.ToolCallEndEvent(tool_call_id=call_id))
        return out

    def finish(self, done: Event | None, snapshot: dict[str, Any]) -> list[BaseEvent]:
        core = self.core
        data = done.data if done is not None else {}
        out = self.client_calls(list(data.get("toolCalls") or [])) if data.get("outcome") == "client_tool_calls" else []
        out += self.close_all()
        out.append(core.StateSnapshotEvent(snapshot=snapshot))
        stop, outcome = data.get("stopReason"), data.get("outcome")
        meta = {"executionId": data.get("executionId")}
        failure = _failure(data) if done is not None else None
        if failure is not None:
            out.append(core.RunErrorEvent(message=failure.message, code=failure.code, metadata=meta))
        elif done is None or stop == "error":
            message = data.get("error") or (self.errors[-1] if self.errors else "the run ended without a result")
            out.append(core.RunErrorEvent(message=str(message), code=str(outcome or "error"), metadata=meta))
        elif outcome == "approval_required":
            interrupts = [core.Interrupt(id=str(p.get("id")), reason="tool_approval", tool_call_id=str(p.get("id")),
                                         message=f"{p.get('tool')} waits for approval",
                                         metadata={"tool": p.get("tool"), "arguments": p.get("arguments"),
                                                   "token": p.get("token")})
                          for p in self.pending]
            out.append(core.RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, metadata=meta,
                                             outcome=core.RunFinishedInterruptOutcome(interrupts=interrupts)))
        elif stop == "cancelled":
            out.append(core.RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, metadata=meta,
                                             outcome=core.RunFinishedCancelledOutcome()))
        else:
            out.append(core.RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, metadata=meta,
                                             outcome=core.RunFinishedSuccessOutcome()))
        return out


def _sse(event: BaseEvent) -> bytes:
    return f"data: {event.model_dump_json(by_alias=True, exclude_none=True)}\n\n".encode()


def _quota_run(core: Any, thread_id: str, run_id: str, exc: QuotaExceeded) -> Response:
    """A run over its user's quota: RUN_STARTED then RUN_ERROR naming the quota and when to
    retry (with ``Retry-After``, as over REST), so an AG-UI client shows the reason as it
    shows any failed run; nothing was run."""
    meta = {"threadId": thread_id, "retryAfter": exc.retry_after}

    async def frames() -> AsyncIterator[bytes]:
        yield _sse(core.RunStartedEvent(thread_id=thread_id, run_id=run_id))
        yield _sse(core.RunErrorEvent(message=quota_refusal(exc), code="quota_exceeded", metadata=meta))

    return sse_response(frames(), headers={"X-Thread-Id": thread_id, **exc.headers})


async def run_agent(request: Request) -> Response:
    """``POST /ag-ui/{agent}``: AG-UI's ``RunAgentInput`` in, AG-UI events out (SSE)."""
    caller = await authenticate(request)
    core = _models()
    body = await read_json(request)
    try:
        run_input = core.RunAgentInput.model_validate(body)
    except Exception as exc:  # pydantic's ValidationError: one line per problem
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])  # type: ignore[attr-defined]
        raise ApiError(422, f"not an AG-UI RunAgentInput: {problems}") from None
    server = server_of(request)
    rt = server.runtime
    agent = request.path_params["agent"]
    from ..api import _keep

    try:
        client = _front_end_tools(run_input)
        if client is not None:
            await _check_client_tools(rt, agent, client)
    except ClientToolError as exc:
        raise ApiError(400, f"front-end tools: {exc}", code="invalid_tools") from None
    results = _tool_results(run_input)
    answered: set[str] = set()
    if run_input.resume:
        # the answers to an interrupt: decide the paused calls; the same execution goes on
        try:
            thread = await open_thread(rt, caller, agent, run_input.thread_id, "ag-ui")
        except DoorError as exc:
            raise ApiError(exc.status, exc.message) from None
        turn = await _resume(request, rt, thread, run_input.resume)
    elif results:
        # the answers to front-end tool calls: the execution waiting for them goes on
        try:
            thread = await open_thread(rt, caller, agent, run_input.thread_id, "ag-ui")
        except DoorError as exc:
            raise ApiError(exc.status, exc.message) from None
        turn = await _continue(rt, thread, results, client)
        answered = set(results)
    else:
        text = _last_user_text(run_input)
        if text is None:
            raise ApiError(422, "'messages' needs a user message with text content")
        try:
            thread = await open_thread(rt, caller, agent, run_input.thread_id, "ag-ui", create=True)
        except DoorError as exc:
            raise ApiError(exc.status, exc.message) from None
        try:
            turn = await start_turn(rt, thread, TurnRequest(content=text, client_tools=client))
        except ClientToolError as exc:
            raise ApiError(400, f"front-end tools: {exc}", code="invalid_tools") from None
        except QuotaExceeded as exc:  # over the caller's quota: a run that ends at once, saying why
            return _quota_run(core, thread.id, run_input.run_id, exc)
    _keep(request, turn.task)
    translator = _Translator(core, thread.id, run_input.run_id)
    translator.answered = answered
    translator.front_end = client.names if client is not None else set()
    base = {"threadId": thread.id, "agent": agent, "executionId": turn.execution_id}

    async def frames() -> AsyncIterator[bytes]:
        ended = False
        try:
            yield _sse(core.RunStartedEvent(thread_id=thread.id, run_id=run_input.run_id,
                                            metadata={"executionId": turn.execution_id}))
            yield _sse(core.StateSnapshotEvent(snapshot={**base, "status": "running"}))
            done: Event | None = None
            async for event in turn_events(turn.sub, turn.task, rt, thread.id, turn.execution_id):
                if event.type == "done" and event.data.get("executionId") == turn.execution_id:
                    done = event
                    break
                for out in translator.translate(event):
                    yield _sse(out)
            ended = True
            snapshot = {**base, **_status(done.data if done is not None else {"stopReason": "error"})}
            result = await _result_of(turn.task)
            if result is not None:
                snapshot["usage"] = result.usage
                if result.value is not None:
                    snapshot["value"] = to_jsonable(result.value)
            for out in translator.finish(done, snapshot):
                yield _sse(out)
        finally:
            if not ended:
                # the client went away mid-run: its run stops with it (not another client's)
                stopper = asyncio.ensure_future(rt.cancel(turn.execution_id))
                _keep(request, stopper)

    return sse_response(frames(), headers={"X-Thread-Id": thread.id}, on_close=turn.sub.close)


async def _check_client_tools(rt: Any, agent: str, client: ClientTools) -> None:
    """Refuse front-end tools named like one of the agent's tools before anything is stored."""
    entry = rt.registry.find("agents", agent)
    if entry is not None:
        await rt.check_client_tools(await rt.registry.aget("agents", entry.name, entry.package), entry.package, client)


async def _result_of(task: asyncio.Task[Any]) -> Any:
    """The execution's result once its ``done`` was seen (None when it failed or was cancelled)."""
    try:
        return await asyncio.shield(task)
    except Exception:
        return None


async def _continue(rt: Any, thread: Any, results: dict[str, str], client: ClientTools | None) -> Turn:
    """Submit the results of the front-end calls the thread's execution waits for and follow it."""
    waiting = await rt.waiting_for_tool_results(list(results), thread.id)
    if waiting is None:
        raise ApiError(422, f"no run of thread {thread.id!r} waits for the results of the tool calls "
                            f"{sorted(results)}: end 'messages' with a user message to start a new run")
    sub = rt.subscribe(thread.id, reasoning=False)
    try:
        task = await rt.resume_with_results(waiting.id, results, TurnOptions.build(client_tools=client))
    except ClientToolError as exc:
        sub.close()
        raise ApiError(422, str(exc), code="invalid_tool_results") from None
    except BaseException:
        sub.close()
        raise
    return Turn(thread, waiting.id, task, sub)


async def _resume(request: Request, rt: Any, thread: Any, entries: list[Any]) -> Turn:
    """Decide the interrupted calls named by ``resume`` (``resolved`` approves unless the
    payload says ``{"approved": false}``; ``cancelled`` denies) and follow the execution."""
    from ...engine.approvals import ApprovalError

    pending = {p["id"]: p for p in await rt.pending_approvals(thread.id)}
    unknown = [e.interrupt_id for e in entries if e.interrupt_id not in pending]
    if unknown:
        raise ApiError(422, f"no call of thread {thread.id!r} waits under interrupt id {unknown[0]!r}")
    decisions = []
    for entry in entries:
        payload = entry.payload if isinstance(entry.payload, dict) else {}
        approved = entry.status == "resolved" and payload.get("approved", entry.payload is not False) is not False
        reason = payload.get("reason") if isinstance(payload.get("reason"), str) else None
        decisions.append((pending[entry.interrupt_id]["token"], approved, reason))
    try:
        decided = await decide_calls(rt, thread.id, decisions)
    except ApprovalError as exc:
        raise ApiError(403, str(exc), code="invalid_approval") from exc
    if decided is None:
        raise ApiError(422, "other calls of this run still wait: answer every interrupt in 'resume'")
    sub, task = decided
    return Turn(thread, pending[entries[0].interrupt_id]["executionId"], task, sub)


def agui_routes() -> list[BaseRoute]:
    return [Route("/ag-ui/{agent:path}", run_agent, methods=["POST"])]
