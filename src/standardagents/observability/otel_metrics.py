"""The execution instruments of :mod:`.metrics`, recorded through the OpenTelemetry metrics
API when the user has a ``MeterProvider`` (their own global one, the one
:func:`configure_from_env` builds from ``OTEL_METRICS_EXPORTER``, or one handed to
:func:`set_meter_provider`); nothing is recorded without one.

The instruments mirror the Prometheus ones (names dotted instead of underscored, the same
attribute names as the Prometheus labels), so the two can feed the same dashboards.
"""

from __future__ import annotations

import logging
import os
from typing import Any

try:  # optional, like the tracing API
    from opentelemetry import metrics as _metrics
except ImportError:  # pragma: no cover - exercised only without the extra
    _metrics = None  # type: ignore[assignment]

try:  # the API's stand-in before a provider is set, and where it keeps the global one (no public names)
    from opentelemetry.metrics import _internal as _api
    from opentelemetry.metrics._internal import _ProxyMeterProvider
except ImportError:  # pragma: no cover - a future API without them
    _api = None  # type: ignore[assignment]
    _ProxyMeterProvider = ()  # type: ignore[assignment,misc]

#: providers that record nothing: the API's no-op one and its stand-in before one is set
_STAND_INS = (() if _metrics is None else _metrics.NoOpMeterProvider, _ProxyMeterProvider)
#: whether the environment names a provider for the API to load (read once, as deployments set it)
_PROVIDER_FROM_ENV = "OTEL_PYTHON_METER_PROVIDER" in os.environ

__all__ = ["OtelMeter", "active", "configure_from_env", "set_meter_provider"]

log = logging.getLogger("standardagents.observability")

_override: Any = None
_meters: dict[int, OtelMeter] = {}

#: bucket boundaries (seconds) advised for the duration histograms, as in Prometheus
SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


def set_meter_provider(provider: Any) -> None:
    """Record this runtime's metrics into ``provider`` (an SDK ``MeterProvider``) instead of
    the global one; ``None`` goes back to the global provider."""
    global _override
    _override = provider
    _meters.clear()


def active() -> OtelMeter | None:
    """The instruments of the configured ``MeterProvider``, or None when there is none."""
    if _metrics is None:
        return None
    provider = _override if _override is not None else _global_provider()
    found = _meters.get(id(provider))
    if found is None:
        if isinstance(provider, _STAND_INS):
            return None
        from .tracing import _our_version

        found = _meters[id(provider)] = OtelMeter(provider.get_meter("standardagents", _our_version()))
    return found


def _global_provider() -> Any:
    """The API's global provider. Asking the API for it looks the environment up each time
    (about a microsecond, and :func:`active` runs per relayed event), so the provider is read
    where the API keeps it once set (set once for good); before that it is the API's stand-in,
    unless the environment names one for the API to load."""
    provider = getattr(_api, "_METER_PROVIDER", None)
    if provider is None and not _PROVIDER_FROM_ENV:
        provider = getattr(_api, "_PROXY_METER_PROVIDER", None)
    return provider if provider is not None else _metrics.get_meter_provider()


class OtelMeter:
    """The instruments, created once per provider; the methods match :class:`.metrics.Meter`."""

    def __init__(self, meter: Any) -> None:
        self.turns_started = meter.create_counter("standardagents.turns.started", "{execution}",
                                                  "Executions started, by agent.")
        self.turns_ended = meter.create_counter("standardagents.turns.ended", "{execution}",
                                                "Executions ended, by agent and outcome.")
        self.turn_seconds = meter.create_histogram("standardagents.turn.duration", "s", "Duration of executions.",
                                                   explicit_bucket_boundaries_advisory=SECONDS)
        self.step_seconds = meter.create_histogram("standardagents.step.duration", "s",
                                                   "Duration of steps (a model call and its tool calls).",
                                                   explicit_bucket_boundaries_advisory=SECONDS)
        self.model_seconds = meter.create_histogram("standardagents.model_call.duration", "s",
                                                    "Duration of model calls, by model definition and status.",
                                                    explicit_bucket_boundaries_advisory=SECONDS)
        self.ttft_seconds = meter.create_histogram("standardagents.model.time_to_first_token", "s",
                                                   "Time to the first streamed delta of model calls.",
                                                   explicit_bucket_boundaries_advisory=SECONDS)
        self.tokens = meter.create_counter("standardagents.model.tokens", "{token}",
                                           "Tokens used, by model and type (input, output).")
        self.cost_usd = meter.create_counter("standardagents.model.cost", "USD",
                                             "Cost of model calls in USD, by model (calls whose price is known).")
        self.tool_calls = meter.create_counter("standardagents.tool_calls", "{call}", "Tool calls, by tool and status.")
        self.running = meter.create_up_down_counter("standardagents.running_executions", "{execution}",
                                                    "Executions running now.")
        from .metrics import RELAY_SECONDS

        self.relay_lag = meter.create_histogram("standardagents.relay.lag", "s",
                                                "Time from an event's publication on another worker to its "
                                                "delivery here through the PostgreSQL relay.",
                                                explicit_bucket_boundaries_advisory=RELAY_SECONDS)

    def turn_started(self, agent: str) -> None:
        attrs = {"agent": agent}
        self.turns_started.add(1, attrs)
        self.running.add(1)

    def turn_ended(self, agent: str, outcome: str, seconds: float) -> None:
        self.turns_ended.add(1, {"agent": agent, "outcome": outcome})
        self.turn_seconds.record(seconds, {"agent": agent})
        self.running.add(-1)

    def step(self, agent: str, seconds: float) -> None:
        self.step_seconds.record(seconds, {"agent": agent})

    def model_call(self, model: str, seconds: float, ttft: float | None, usage: Any, status: str) -> None:
        self.model_seconds.record(seconds, {"model": model, "status": status})
        if ttft is not None:
            self.ttft_seconds.record(ttft, {"model": model})
        if usage is not None:
            self.tokens.add(usage.prompt_tokens, {"model": model, "type": "input"})
            self.tokens.add(usage.completion_tokens, {"model": model, "type": "output"})

    def cost(self, model: str, usd: float) -> None:
        self.cost_usd.add(usd, {"model": model})

    def tool_call(self, tool: str, status: str) -> None:
        self.tool_calls.add(1, {"tool": tool, "status": status})


class Both:
    """Prometheus and OpenTelemetry instruments at once (both configured)."""

    __slots__ = ("first", "second")

    def __init__(self, first: Any, second: Any) -> None:
        self.first = first
        self.second = second

    def turn_started(self, agent: str) -> None:
        self.first.turn_started(agent)
        self.second.turn_started(agent)

    def turn_ended(self, agent: str, outcome: str, seconds: float) -> None:
        self.first.turn_ended(agent, outcome, seconds)
        self.second.turn_ended(agent, outcome, seconds)

    def step(self, agent: str, seconds: float) -> None:
        self.first.step(agent, seconds)
        self.second.step(agent, seconds)

    def model_call(self, model: str, seconds: float, ttft: float | None, usage: Any, status: str) -> None:
        self.first.model_call(model, seconds, ttft, usage, status)
        self.second.model_call(model, seconds, ttft, usage, status)

    def cost(self, model: str, usd: float) -> None:
        self.first.cost(model, usd)
        self.second.cost(model, usd)

    def tool_call(self, tool: str, status: str) -> None:
        self.first.tool_call(tool, status)
        self.second.tool_call(tool, status)


def configure_from_env() -> bool:
    """Install a global ``MeterProvider`` when ``OTEL_METRICS_EXPORTER`` asks for one
    (``otlp``, ``console``; ``none`` or unset: no metrics through OpenTelemetry) and none is
    installed yet. Returns whether OpenTelemetry metrics are on afterwards.

    Also read: ``OTEL_SDK_DISABLED``, ``OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT`` /
    ``_HEADERS``, ``OTEL_METRIC_EXPORT_INTERVAL``, ``OTEL_SERVICE_NAME``,
    ``OTEL_RESOURCE_ATTRIBUTES``."""
    env = os.environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if active() is not None:
        return True
    names = [n.strip() for n in env.get("OTEL_METRICS_EXPORTER", "").strip().lower().split(",") if n.strip()]
    if not names or names == ["none"]:
        return False
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import (
            ConsoleMetricExporter,
            PeriodicExportingMetricReader,
        )
        from opentelemetry.sdk.resources import Resource
    except ImportError:
        log.warning("OTEL_METRICS_EXPORTER asks for metrics, but the OpenTelemetry SDK is not installed: "
                    "pip install 'standardagents[otel]'")
        return False
    readers: list[Any] = []
    for name in names:
        if name == "console":
            readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter()))
        elif name == "otlp":
            protocol = (env.get("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                        or "http/protobuf").strip().lower()
            if protocol == "grpc":
                log.warning("OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported for metrics here; "
                            "using http/protobuf")
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

            readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
        elif name != "none":
            log.warning("OTEL_METRICS_EXPORTER=%s is not supported here (use otlp or console)", name)
    if not readers:
        return False
    attributes: dict[str, Any] = {}
    if not env.get("OTEL_SERVICE_NAME") and "service.name=" not in env.get("OTEL_RESOURCE_ATTRIBUTES", ""):
        attributes["service.name"] = "standardagents"
    assert _metrics is not None
    _metrics.set_meter_provider(MeterProvider(resource=Resource.create(attributes), metric_readers=readers))
    return active() is not None
