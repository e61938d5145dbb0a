"""standardagents: a Python runtime for the Standard Agents specification."""

from __future__ import annotations

__version__ = "0.1.0"
