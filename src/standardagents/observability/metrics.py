"""Prometheus instruments (filled in by the metrics layer when a server turns them on)."""

from __future__ import annotations

from typing import Any

_active: Any = None


def active() -> Any:
    """The instruments executions record into, or None when metrics are off."""
    return _active
