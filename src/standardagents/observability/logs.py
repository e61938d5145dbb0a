"""JSON log records that join traces and threads: inside a turn each record carries the
``trace_id`` and ``span_id`` of the current span and the thread and execution ids.

With ``--log-format json`` every record of the process is JSON: the handler sits on the root
logger, so a tool's or hook's own ``logging.getLogger(...)`` records (INFO and up) come out
as JSON lines with the turn's ids, beside uvicorn's and the runtime's."""

from __future__ import annotations

import json
import logging
import logging.config
from datetime import UTC, datetime
from typing import Any

__all__ = ["JsonFormatter", "configure_logging", "uvicorn_log_config"]

#: loggers of the HTTP clients models are called through: one INFO line per request would
#: drown the records that matter, so only their warnings and errors are kept
_QUIET = ("httpx", "httpcore")

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
    """A ``logging.config.dictConfig`` for the whole process (None: uvicorn's own text setup).

    For ``json`` the one handler is the root logger's, at INFO: uvicorn's loggers and ours
    write to it directly, every other logger (the project's tools and hooks, libraries)
    reaches it by propagation."""
    if log_format != "json":
        return None
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "standardagents.observability.logs.JsonFormatter"}},
        "handlers": {"default": handler},
        "root": {"handlers": ["default"], "level": "INFO"},
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"level": "INFO"},
            "uvicorn.access": {"handlers": ["default"], "level": "INFO", "propagate": False},
            "standardagents": {"handlers": ["default"], "level": "INFO", "propagate": False},
            **{name: {"level": "WARNING"} for name in _QUIET},
        },
    }


def configure_logging(log_format: str) -> None:
    """Set up the process's logging for ``log_format`` before anything is written (the
    server's start-up line included); ``text`` leaves logging as it is. Python's warnings
    become records too, so nothing reaches stderr outside the format."""
    config = uvicorn_log_config(log_format)
    if config is None:
        return
    logging.config.dictConfig(config)
    logging.captureWarnings(True)
