"""JSON log records that join traces and threads: inside a turn each record carries the
``trace_id`` and ``span_id`` of the current span and the thread and execution ids."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

__all__ = ["JsonFormatter", "uvicorn_log_config"]

try:
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - without the OpenTelemetry API there are no spans
    _trace = None  # type: ignore[assignment]


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time``, ``level``, ``logger``, ``message``, and when
    known ``trace_id``, ``span_id``, ``thread_id``, ``execution_id``, ``exception``."""

    def format(self, record: logging.LogRecord) -> str:
        from . import current_ids

        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if _trace is not None:
            ctx = _trace.get_current_span().get_span_context()
            if ctx.is_valid:
                out["trace_id"] = format(ctx.trace_id, "032x")
                out["span_id"] = format(ctx.span_id, "016x")
        ids = current_ids()
        if ids is not None:
            out["thread_id"], out["execution_id"] = ids
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def uvicorn_log_config(log_format: str) -> dict[str, Any] | None:
    """A ``logging.config.dictConfig`` for uvicorn and our loggers (None: uvicorn's own)."""
    if log_format != "json":
        return None
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "standardagents.observability.logs.JsonFormatter"}},
        "handlers": {"default": handler},
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"level": "INFO"},
            "uvicorn.access": {"handlers": ["default"], "level": "INFO", "propagate": False},
            "standardagents": {"handlers": ["default"], "level": "INFO", "propagate": False},
        },
    }
