"""Links from a turn's trace id to the tracing UI that holds its spans (Jaeger, Tempo, ...).

The template comes from ``STANDARDAGENTS_TRACE_URL`` (``serve --trace-url`` sets it), for
example ``http://localhost:16686/trace/{trace_id}``; it is read at each request, so every
worker of a server answers alike. Without it, no link is made and clients show the bare id.
"""

from __future__ import annotations

import os

__all__ = ["TRACE_URL_ENV", "check_template", "trace_link", "trace_template"]

TRACE_URL_ENV = "STANDARDAGENTS_TRACE_URL"
PLACEHOLDER = "{trace_id}"


def check_template(template: str) -> str | None:
    """Why ``template`` cannot make trace links, or ``None`` when it can."""
    if not template.startswith(("http://", "https://")):
        return "a trace URL starts with http:// or https://"
    if PLACEHOLDER not in template:
        return f"a trace URL holds {PLACEHOLDER} where the trace id goes"
    return None


def trace_template() -> str | None:
    """The configured template, or ``None`` (unset, or not one that can make links)."""
    template = os.environ.get(TRACE_URL_ENV, "").strip()
    return template if template and check_template(template) is None else None


def trace_link(trace_id: str | None) -> str | None:
    """The tracing UI's address of ``trace_id`` (``None`` without a template or an id)."""
    template = trace_template()
    if template is None or not trace_id:
        return None
    return template.replace(PLACEHOLDER, trace_id)
