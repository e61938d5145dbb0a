"""Traces, metrics and log context for executions, behind a few calls the engine makes.

The engine calls :func:`run_execution`, :func:`step`, :func:`model_call` and
:func:`tool_call`; everything else (OpenTelemetry spans, Prometheus instruments, the ids
JSON logs carry) lives here. When neither tracing nor metrics is on, the engine's hot call
sites first read :data:`observed` (0: nothing in this process is observed) and skip the
call, so the hot path stays as it was; the other calls are a context-variable read that
finds nothing.

Tracing is on when OpenTelemetry has a real ``TracerProvider``: the global one (the
user's own, or the one :func:`configure_from_env` builds from the ``OTEL_*`` variables)
or one handed to :func:`set_tracer_provider`. Likewise the execution metrics go through
OpenTelemetry's metrics API when there is a real ``MeterProvider`` (global, from
``OTEL_METRICS_EXPORTER``, or :func:`set_meter_provider`), besides Prometheus in ``serve``.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from . import metrics, otel_metrics, tracing
from .otel_metrics import set_meter_provider
from .probe import ExecutionProbe, ModelCallProbe, ToolCallProbe, effect_span
from .tracing import (
    capture_content,
    carried_context,
    set_tracer_provider,
    trace_headers,
    tracing_active,
)

if TYPE_CHECKING:
    from ..engine.results import ExecutionResult
    from .ports import TracedExecution

__all__ = [
    "capture_content",
    "carried_context",
    "configure_from_env",
    "current_ids",
    "effect_run",
    "event",
    "hook",
    "model_call",
    "observed",
    "relay_lag",
    "run_execution",
    "set_meter_provider",
    "set_tracer_provider",
    "step",
    "tool_call",
    "trace_headers",
    "tracing_active",
]

#: the probe of the execution running in this context (None: nothing is observed)
_probe: ContextVar[Any] = ContextVar("standardagents_probe", default=None)
#: (thread id, execution id) of the execution running in this context, for log records
_ids: ContextVar[tuple[str, str] | None] = ContextVar("standardagents_ids", default=None)

#: how many executions of this process are observed at this moment. A hot call site of the
#: engine reads it first and, at 0, skips the call altogether; otherwise the probe of its own
#: context (None for an execution that started unobserved) decides
observed = 0
_observed_lock = threading.Lock()  # executions may run on several threads' event loops


def _count(delta: int) -> None:
    global observed
    with _observed_lock:
        observed += delta


class _Nothing:
    """The shared stand-in returned when nothing observes: every method does nothing."""

    __slots__ = ()

    #: no span, so no trace to name (what a traced model call carries here)
    trace_id = None

    def __enter__(self) -> _Nothing:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def first_token(self) -> None:
        return None

    def response(self, response: Any, cost: float | None = None) -> None:
        return None

    def outcome(self, outcome: Any) -> None:
        return None


NOTHING = _Nothing()


def configure_from_env() -> bool:
    """Install the global OpenTelemetry providers the ``OTEL_*`` variables ask for (traces:
    ``OTEL_TRACES_EXPORTER`` or an OTLP endpoint; metrics: ``OTEL_METRICS_EXPORTER``) where
    none is installed yet. Returns whether tracing is on afterwards."""
    traced = tracing.configure_from_env()
    otel_metrics.configure_from_env()
    return traced


def current_ids() -> tuple[str, str] | None:
    """(thread id, execution id) of the execution this code runs in, if any."""
    return _ids.get()


async def run_execution(execution: TracedExecution) -> ExecutionResult:
    """Run ``execution`` (``Execution.run``) inside its span and instruments, if any."""
    ids = _ids.set((execution.thread_id, execution.record.id))
    try:
        probe = _begin(execution)
        if probe is None:
            return await execution.run()
        token = _probe.set(probe)
        _count(1)
        try:
            result = None
            try:
                result = await execution.run()
                return result
            finally:
                probe.finish(result)
        finally:
            _count(-1)
            _probe.reset(token)
    finally:
        _ids.reset(ids)


def _begin(execution: TracedExecution) -> Any:
    tracer = tracing.tracer()
    meter: Any = metrics.active()
    otel = otel_metrics.active()
    if otel is not None:
        meter = otel if meter is None else otel_metrics.Both(meter, otel)
    if tracer is None and meter is None:
        return None
    return ExecutionProbe(execution, tracer, meter)


def step() -> None:
    """A step of the current execution starts (closes the previous step's timing)."""
    probe = _probe.get()
    if probe is not None and probe.meter is not None:
        probe.step()


def model_call(model: Any, request: Any, fallback_from: Any = None) -> Any:
    """A context manager around one model call: ``chat {model}`` span, duration, tokens.

    Inside, ``.first_token()`` marks the first streamed delta (the engine sees it anyway, so
    the model's stream is not wrapped) and ``.response(r, cost)`` records the reply and its
    price (computed once by the engine)."""
    probe = _probe.get()
    return NOTHING if probe is None else ModelCallProbe(probe, model, request, fallback_from)


def event(name: str, attributes: dict[str, Any]) -> None:
    """Record an event on the current span of an observed execution (nothing otherwise)."""
    probe = _probe.get()
    if probe is not None and probe.tracer is not None:
        from opentelemetry import trace

        trace.get_current_span().add_event(name, attributes)


def hook(name: str, hook_id: str) -> Any:
    """A context manager around one hook invocation: a ``hook {name}`` span when tracing."""
    probe = _probe.get()
    return NOTHING if probe is None or probe.tracer is None else probe.hook(name, hook_id)


def tool_call(call: Any, tool: Any) -> Any:
    """A context manager around one tool call: ``execute_tool {tool}`` span and counts;
    ``.outcome(o)`` records how it ended."""
    probe = _probe.get()
    return NOTHING if probe is None else ToolCallProbe(probe, call, tool)


def effect_run(effect: Any) -> Any:
    """A context manager around one run of a scheduled effect: an ``effect {name}`` span
    when tracing, current while it runs and linked to the span that scheduled it (whose
    context the effect record keeps, so the link holds in another process, after a restart)."""
    tracer = tracing.tracer()
    if tracer is None:
        return NOTHING
    return effect_span(tracer, effect)


def relay_lag(seconds: float) -> None:
    """An event published by another worker was delivered here ``seconds`` after its
    publication (recorded by the Prometheus and OpenTelemetry instruments that are on)."""
    prometheus = metrics.active()
    if prometheus is not None:
        prometheus.relay_lag.observe(seconds)
    otel = otel_metrics.active()
    if otel is not None:
        otel.relay_lag.record(seconds)
