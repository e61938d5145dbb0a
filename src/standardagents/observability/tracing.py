"""OpenTelemetry wiring: which tracer (if any) spans go to, context in and out of HTTP.

``opentelemetry-api`` is imported lazily and is optional: without it (or without a real
``TracerProvider``) tracing is simply off. ``standardagents[otel]`` brings the SDK and the
OTLP exporter that :func:`configure_from_env` sets up from OpenTelemetry's own variables.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping
from typing import Any

try:  # the API is small, but still optional
    from opentelemetry import propagate as _propagate
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - exercised only without the extra
    _trace = None  # type: ignore[assignment]
    _propagate = None  # type: ignore[assignment]

__all__ = [
    "capture_content",
    "carried_context",
    "configure_from_env",
    "extract_context",
    "set_tracer_provider",
    "trace_headers",
    "tracer",
    "tracing_active",
]

log = logging.getLogger("standardagents.observability")

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_TRUE = ("1", "true", "yes", "on")

_override: Any = None
_capture: bool | None = None
_tracers: dict[int, Any] = {}


def set_tracer_provider(provider: Any) -> None:
    """Send this runtime's spans to ``provider`` (an SDK ``TracerProvider``) instead of the
    global one; ``None`` goes back to the global provider."""
    global _override
    _override = provider
    _tracers.clear()


def capture_content(enabled: bool | None) -> None:
    """Record message contents and tool arguments/results on spans (``True``), never
    (``False``), or as ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` says (``None``)."""
    global _capture
    _capture = enabled


def capturing() -> bool:
    if _capture is not None:
        return _capture
    return os.environ.get(CAPTURE_ENV, "").strip().lower() in _TRUE


def tracer() -> Any:
    """The tracer spans go to, or None when tracing is off."""
    if _trace is None:
        return None
    provider = _override if _override is not None else _trace.get_tracer_provider()
    if isinstance(provider, _trace.ProxyTracerProvider | _trace.NoOpTracerProvider):
        return None
    found = _tracers.get(id(provider))
    if found is None:
        found = _tracers[id(provider)] = provider.get_tracer("standardagents", _our_version())
    return found


@functools.cache
def _our_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("standardagents")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return None


def tracing_active() -> bool:
    """Whether spans are being recorded (a real tracer provider is in place)."""
    return tracer() is not None


def trace_headers() -> dict[str, str]:
    """``traceparent`` (and the other propagated headers) of the current span, for an
    outgoing request; empty when no span is recording here."""
    if _trace is None:
        return {}
    span = _trace.get_current_span()
    if not span.get_span_context().is_valid:
        return {}
    carrier: dict[str, str] = {}
    _propagate.inject(carrier)
    return carrier


def carried_context() -> dict[str, Any]:
    """The current span's context, to keep with a paused execution so its resumption (later,
    perhaps in another process) links back to it; empty when not tracing."""
    headers = trace_headers()
    return {"trace": headers} if headers else {}


def extract_context(headers: Mapping[str, str]) -> Any:
    """The OpenTelemetry context an incoming request's headers carry (None when there is
    no ``traceparent`` or tracing is off)."""
    if _trace is None or "traceparent" not in headers or tracer() is None:
        return None
    return _propagate.extract(headers)


def span_context_from(carried: Any) -> Any:
    """The span context kept by :func:`carried_context`, or None."""
    if _trace is None or not isinstance(carried, dict) or "traceparent" not in carried:
        return None
    ctx = _propagate.extract(carried)
    span_context = _trace.get_current_span(ctx).get_span_context()
    return span_context if span_context.is_valid else None


def configure_from_env() -> bool:
    """Install a global ``TracerProvider`` exporting over OTLP when the ``OTEL_*`` variables
    ask for one and none is installed yet. Returns whether tracing is on afterwards.

    Read: ``OTEL_SDK_DISABLED``, ``OTEL_TRACES_EXPORTER`` (``otlp``, ``console``, ``none``),
    ``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT`` / ``_PROTOCOL`` / ``_HEADERS``,
    ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER[_ARG]``."""
    env = os.environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if tracer() is not None:
        return True
    exporter_name = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    wanted = exporter_name not in ("", "none") or bool(
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
    if not wanted or exporter_name == "none":
        return False
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        log.warning("OTEL_* variables ask for traces, but the OpenTelemetry SDK is not installed: "
                    "pip install 'standardagents[otel]'")
        return False
    attributes: dict[str, Any] = {}
    if not env.get("OTEL_SERVICE_NAME") and "service.name=" not in env.get("OTEL_RESOURCE_ATTRIBUTES", ""):
        attributes["service.name"] = "standardagents"
    provider = TracerProvider(resource=Resource.create(attributes))
    exporters: list[Any] = []
    for name in (exporter_name or "otlp").split(","):
        name = name.strip()
        if name == "console":
            exporters.append(ConsoleSpanExporter())
        elif name == "otlp":
            exporters.append(_otlp_exporter())
        elif name:
            log.warning("OTEL_TRACES_EXPORTER=%s is not supported here (use otlp or console)", name)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    assert _trace is not None
    _trace.set_tracer_provider(provider)
    return tracer() is not None


def _otlp_exporter() -> Any:
    protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip().lower()
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            raise RuntimeError("OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs opentelemetry-exporter-otlp-proto-grpc; "
                               "install it, or use http/protobuf (the default)") from exc
        return OTLPSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    return HttpExporter()
