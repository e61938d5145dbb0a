"""What one observed execution records: its spans (when tracing) and instruments (when
metrics are on). Created only when at least one of them is on."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from . import tracing

try:
    from opentelemetry import context as _context
    from opentelemetry import trace as _trace
    from opentelemetry.trace import Status, StatusCode

    _CLIENT = _trace.SpanKind.CLIENT
except ImportError:  # pragma: no cover - metrics without the OpenTelemetry API
    pass

if TYPE_CHECKING:
    from ..engine.results import ExecutionResult
    from .ports import TracedExecution

__all__ = ["ExecutionProbe", "ModelCallProbe", "ToolCallProbe", "effect_span"]

def _scalars(data: dict[str, Any], prefix: str = "standardagents.") -> dict[str, Any]:
    return {prefix + k: v for k, v in data.items() if isinstance(v, str | int | float | bool)}


#: per model (name, provider, model, endpoint URL): the ``chat`` span's name and the attributes
#: that never change between its calls, so a call copies one dict instead of building it
#: (and parsing the base URL) again
_model_static: dict[tuple[Any, ...], tuple[str, dict[str, Any]]] = {}
#: per tool (name, origin, origin detail, description): the ``execute_tool`` span's name and
#: fixed attributes, for the same reason
_tool_static: dict[tuple[Any, ...], tuple[str, dict[str, Any]]] = {}
_CACHE_LIMIT = 512


def _server(base_url: str | None) -> dict[str, Any]:
    if not base_url:
        return {}
    parts = urlsplit(base_url)
    out: dict[str, Any] = {}
    if parts.hostname:
        out["server.address"] = parts.hostname
    if parts.port:
        out["server.port"] = parts.port
    return out


def _endpoint_of(provider: Any) -> str | None:
    """The URL a provider's client actually sends to: its ``base_url`` (the OpenAI provider
    resolves ``OPENAI_BASE_URL`` into it), else its SDK client's (Anthropic's reads
    ``ANTHROPIC_BASE_URL``); None for a provider without one (the offline test model)."""
    url = getattr(provider, "base_url", None) or getattr(getattr(provider, "client", None), "base_url", None)
    return str(url) if url else None


def _endpoint(probe: ExecutionProbe, model: Any) -> str | None:
    """Where the call goes: the endpoint of the provider the runtime made for ``model`` (the
    definition's ``base_url`` may be unset, the address then coming from the environment)."""
    try:
        return _endpoint_of(probe.execution.rt.provider_for(model)) or model.base_url
    except Exception:  # a provider that cannot be built fails the call itself, not its span
        return model.base_url


def _model_attributes(model: Any, endpoint: str | None) -> tuple[str, dict[str, Any]]:
    key = (model.name, model.provider, model.model, endpoint)
    found = _model_static.get(key)
    if found is None:
        if len(_model_static) >= _CACHE_LIMIT:
            _model_static.clear()
        found = _model_static[key] = (f"chat {model.model}", {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": model.provider,
            "gen_ai.request.model": model.model,
            "standardagents.model": model.name,
            **_server(endpoint),
        })
    return found


def _tool_attributes(name: str, tool: Any) -> tuple[str, dict[str, Any]]:
    origin = getattr(tool, "origin", None) or "code"
    detail = getattr(tool, "origin_detail", None) if tool is not None else None
    description = tool.description if tool is not None else None
    key = (name, origin, detail, description)
    found = _tool_static.get(key)
    if found is None:
        if len(_tool_static) >= _CACHE_LIMIT:
            _tool_static.clear()
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.type": "function" if origin == "code" else "extension",
            "standardagents.tool.origin": origin,
        }
        if detail:
            attrs["standardagents.tool.origin_detail"] = detail
        if description:
            attrs["gen_ai.tool.description"] = description[:500]
        found = _tool_static[key] = (f"execute_tool {name}", attrs)
    return found


def _parts(message: dict[str, Any]) -> dict[str, Any]:
    """A chat message in the GenAI conventions' message shape (role + typed parts)."""
    parts: list[dict[str, Any]] = []
    content = message.get("content")
    if isinstance(content, str) and content:
        parts.append({"type": "text", "content": content})
    elif isinstance(content, list):
        for piece in content:
            if isinstance(piece, dict) and piece.get("type") == "text":
                parts.append({"type": "text", "content": piece.get("text", "")})
    for call in message.get("tool_calls") or ():
        fn = call.get("function", {})
        parts.append({"type": "tool_call", "id": call.get("id"), "name": fn.get("name"),
                      "arguments": fn.get("arguments")})
    if message.get("role") == "tool":
        return {"role": "tool", "parts": [{"type": "tool_call_response", "id": message.get("tool_call_id"),
                                            "response": content}]}
    return {"role": message.get("role"), "parts": parts}


class ExecutionProbe:
    """Spans and instruments of one execution (the ``invoke_agent`` span is current while
    it runs, so model and tool spans, subagents and outgoing requests nest under it)."""

    def __init__(self, execution: TracedExecution, tracer: Any, meter: Any) -> None:
        self.execution = execution
        self.tracer = tracer
        self.meter = meter
        self.agent = execution.agent.name
        self.span: Any = None
        #: the trace id (32 hex digits) of this execution's spans, for the step records
        self.trace_id: str | None = None
        self._token: Any = None
        self._step_started: float | None = None
        self._started = time.perf_counter()
        self.capture = tracer is not None and tracing.capturing()
        if meter is not None:
            meter.turn_started(self.agent)
        if tracer is None:
            return
        record = execution.record
        resume = execution.resume
        links = []
        if resume is not None:
            paused = tracing.span_context_from(record.state.get("trace"))
            if paused is not None:
                links.append(_trace.Link(paused, {"standardagents.link": "approval_pause"}))
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": self.agent,
            "gen_ai.conversation.id": execution.thread_id,
            "standardagents.execution.id": record.id,
            "standardagents.agent.type": execution.agent.type,
            "standardagents.side": record.side,
            "standardagents.resumed": resume is not None,
        }
        self.span = span = tracer.start_span(f"invoke_agent {self.agent}", kind=_trace.SpanKind.INTERNAL,
                                             attributes=attrs, links=links)
        if resume is not None:
            for call_id, decision in (resume.get("decisions") or {}).items():
                span.add_event("standardagents.approval.decided", {
                    "standardagents.call.id": call_id, "standardagents.approved": bool(decision.get("approved"))})
        trace_id = span.get_span_context().trace_id
        self.trace_id = format(trace_id, "032x") if trace_id else None
        self._token = _context.attach(_trace.set_span_in_context(span))

    # steps ---------------------------------------------------------------------------------
    def step(self) -> None:
        """A step starts: the previous one's duration goes to the meter (called only with one)."""
        now = time.perf_counter()
        if self._step_started is not None and self.meter is not None:
            self.meter.step(self.agent, now - self._step_started)
        self._step_started = now

    def hook(self, name: str, hook_id: str) -> _HookCall:
        return _HookCall(self.tracer, name, hook_id)

    # the end -------------------------------------------------------------------------------
    def finish(self, result: ExecutionResult | None) -> None:
        now = time.perf_counter()
        outcome = result.outcome if result is not None else "error"
        if self.meter is not None:
            if self._step_started is not None:
                self.meter.step(self.agent, now - self._step_started)
            self.meter.turn_ended(self.agent, outcome, now - self._started)
        span = self.span
        if span is None:
            return
        end: dict[str, Any] = {"standardagents.outcome": outcome, "standardagents.steps": self.execution.ex.step_count}
        if result is not None:
            end["standardagents.stop_reason"] = result.stop_reason
            if result.stopped_by:
                end["standardagents.stopped_by"] = result.stopped_by
            usage = result.usage
            if usage:
                end["gen_ai.usage.input_tokens"] = usage.get("prompt_tokens", 0)
                end["gen_ai.usage.output_tokens"] = usage.get("completion_tokens", 0)
            payload = result.payload or {}
            if outcome == "approval_required":
                for request in payload.get("approvals", ()):
                    span.add_event("standardagents.approval.request", {
                        "standardagents.call.id": request.get("id"), "standardagents.tool": request.get("tool")})
            elif outcome == "guardrail":
                span.add_event("standardagents.guardrail", _scalars(payload))
            elif outcome == "handoff":
                span.add_event("standardagents.handoff", {})
            if result.stop_reason == "error":
                end["error.type"] = outcome
                span.set_status(Status(StatusCode.ERROR, result.error or outcome))
            if self.capture and result.text:
                end["gen_ai.output.messages"] = json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": result.text}]}])
        else:
            span.set_status(Status(StatusCode.ERROR, "the execution raised"))
        span.set_attributes(end)
        if self._token is not None:
            _context.detach(self._token)
            self._token = None
        span.end()


class ModelCallProbe:
    """One model call: the ``chat {model}`` span (current while it runs) and its figures.

    The span stays current for the whole call, not only while the request is sent: a
    provider of the user's, an instrumented HTTP client, a log record written meanwhile or
    a ``traceparent`` injected with OpenTelemetry's own API all see it as their parent."""

    __slots__ = ("_started", "_token", "cost", "fallback_from", "model", "probe", "reply", "request", "span",
                 "trace_id", "ttft")

    def __init__(self, probe: ExecutionProbe, model: Any, request: Any, fallback_from: Any) -> None:
        self.probe = probe
        #: the trace of the call's span (None: not traced), for the step's record
        self.trace_id = probe.trace_id
        self.model = model
        self.request = request
        self.fallback_from = fallback_from
        self.span: Any = None
        self._token: Any = None
        self._started = 0.0
        self.ttft: float | None = None
        self.reply: Any = None
        self.cost: float | None = None

    def __enter__(self) -> ModelCallProbe:
        self._started = time.perf_counter()
        tracer = self.probe.tracer
        if tracer is None:
            return self
        model, request = self.model, self.request
        name, static = _model_attributes(model, _endpoint(self.probe, model))
        attrs = static.copy()
        attrs["standardagents.step"] = self.probe.execution.ex.step_count
        if request.max_tokens:
            attrs["gen_ai.request.max_tokens"] = request.max_tokens
        if request.temperature is not None:
            attrs["gen_ai.request.temperature"] = request.temperature
        if request.top_p is not None:
            attrs["gen_ai.request.top_p"] = request.top_p
        if self.probe.capture:
            system = [m for m in request.messages if m.get("role") == "system"]
            if system:
                attrs["gen_ai.system_instructions"] = json.dumps(
                    [{"type": "text", "content": m.get("content")} for m in system])
            attrs["gen_ai.input.messages"] = json.dumps(
                [_parts(m) for m in request.messages if m.get("role") != "system"])
        self.span = span = tracer.start_span(name, kind=_CLIENT, attributes=attrs)
        fallback = self.fallback_from
        if fallback is not None:
            failed_model, error = fallback
            span.add_event("standardagents.fallback", {"standardagents.fallback.from": failed_model,
                                                       "error.type": type(error).__name__,
                                                       "standardagents.fallback.error": str(error)[:500]})
        self._token = _context.attach(_trace.set_span_in_context(span))
        return self

    def first_token(self) -> None:
        if self.ttft is None:
            self.ttft = time.perf_counter() - self._started

    def response(self, response: Any, cost: float | None = None) -> None:
        """The model's reply and its price (the engine computes it anyway; None: unpriced)."""
        self.reply = response
        self.cost = cost

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        elapsed = time.perf_counter() - self._started
        reply = self.reply
        usage = reply.usage if reply is not None else None
        cost = self.cost
        meter = self.probe.meter
        if meter is not None and cost is not None:
            meter.cost(self.model.name, cost)
        if meter is not None:
            status = "ok" if exc is None else ("cancelled" if exc_type is not None and issubclass(exc_type, BaseException)
                                               and not issubclass(exc_type, Exception) else "error")
            meter.model_call(self.model.name, elapsed, self.ttft, usage, status)
        span = self.span
        if span is None:
            return
        end: dict[str, Any] = {}
        if reply is not None:
            if reply.model:
                end["gen_ai.response.model"] = reply.model
            if reply.finish_reason:
                end["gen_ai.response.finish_reasons"] = [reply.finish_reason]
            if usage is not None:
                end["gen_ai.usage.input_tokens"] = usage.prompt_tokens
                end["gen_ai.usage.output_tokens"] = usage.completion_tokens
            if self.probe.capture:
                out = {"role": "assistant", "content": reply.text or None, "tool_calls": [
                    {"id": c.id, "function": {"name": c.name, "arguments": c.arguments}} for c in reply.tool_calls]}
                shaped = _parts(out)
                shaped["finish_reason"] = reply.finish_reason
                end["gen_ai.output.messages"] = json.dumps([shaped])
        if cost is not None:
            end["standardagents.cost_usd"] = cost
        if self.ttft is not None:
            end["standardagents.time_to_first_token"] = self.ttft
        if exc is not None:
            end["error.type"] = getattr(exc, "code", None) or type(exc).__name__
            if isinstance(exc, Exception):
                span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, str(exc)[:500]))
        span.set_attributes(end)
        if self._token is not None:
            _context.detach(self._token)
        span.end()


class ToolCallProbe:
    """One tool call: the ``execute_tool {tool}`` span and its count.

    The span is current for the whole call, its argument checks included: the tool, its
    ``after_tool_call_*`` hooks (spans of their own), an MCP request (which carries the
    span's ``traceparent``) and a subagent's execution all run inside it and nest under it."""

    __slots__ = ("_token", "call", "probe", "result", "span", "tool")

    def __init__(self, probe: ExecutionProbe, call: Any, tool: Any) -> None:
        self.probe = probe
        self.call = call
        self.tool = tool
        self.span: Any = None
        self._token: Any = None
        self.result: Any = None

    def __enter__(self) -> ToolCallProbe:
        tracer = self.probe.tracer
        if tracer is None:
            return self
        call = self.call
        name, static = _tool_attributes(call.name, self.tool)
        attrs = static.copy()
        attrs["gen_ai.tool.call.id"] = call.id
        if self.probe.capture:
            attrs["gen_ai.tool.call.arguments"] = call.arguments or ""
        self.span = span = tracer.start_span(name, attributes=attrs)
        self._token = _context.attach(_trace.set_span_in_context(span))
        return self

    def outcome(self, outcome: Any) -> None:
        self.result = outcome

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        outcome = self.result
        status = outcome.result.status if outcome is not None else ("cancelled" if exc is not None else "error")
        meter = self.probe.meter
        if meter is not None:
            meter.tool_call(self.call.name, status)
        span = self.span
        if span is None:
            return
        end: dict[str, Any] = {"standardagents.tool.status": status}
        if outcome is not None:
            if outcome.repaired or outcome.notes:
                span.add_event("standardagents.tool.arguments_repaired",
                               {"standardagents.notes": [str(n) for n in outcome.notes]})
            if outcome.result.status == "error":
                end["error.type"] = "tool_error"
                span.set_status(Status(StatusCode.ERROR, (outcome.result.error or "")[:500]))
            if self.probe.capture:
                value = outcome.result.result if outcome.result.status == "success" else outcome.result.error
                end["gen_ai.tool.call.result"] = value or ""
        elif exc is not None:
            end["error.type"] = type(exc).__name__
            span.set_status(Status(StatusCode.ERROR, "the tool call did not finish"))
        span.set_attributes(end)
        if self._token is not None:
            _context.detach(self._token)
        span.end()


class _HookCall:
    """One hook invocation: its ``hook {name}`` span, current while the hook runs; a hook
    that raises leaves an ``exception`` event and an error status (the engine then logs it
    and goes on)."""

    __slots__ = ("_token", "span")

    def __init__(self, tracer: Any, name: str, hook_id: str) -> None:
        self.span = tracer.start_span(f"hook {name}", attributes={
            "standardagents.hook.name": name, "standardagents.hook.id": hook_id})
        self._token: Any = None

    def __enter__(self) -> _HookCall:
        self._token = _context.attach(_trace.set_span_in_context(self.span))
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        span = self.span
        _context.detach(self._token)
        if isinstance(exc, Exception):
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        span.end()


def effect_span(tracer: Any, effect: Any) -> Any:
    """The span of one effect run: a root of its own trace (it runs later, apart from the
    turn that scheduled it), linked to the scheduling span. An exception the effect raises
    is recorded and marks the span as an error, then goes on to the scheduler."""
    links = []
    scheduled_by = tracing.span_context_from(effect.trace)
    if scheduled_by is not None:
        links.append(_trace.Link(scheduled_by, {"standardagents.link": "scheduled_by"}))
    span = tracer.start_span(f"effect {effect.name}", context=_context.Context(), links=links, attributes={
        "standardagents.effect.id": effect.id,
        "standardagents.effect.name": effect.name,
        "standardagents.effect.attempt": effect.attempts,
        "gen_ai.conversation.id": effect.thread_id,
    })
    return _trace.use_span(span, end_on_exit=True, record_exception=True, set_status_on_exception=True)
