"""Agents as portable JSON documents (``cubicecho.agent/1``): parse, layer, export.

A document is read leniently (bad values are dropped with a warning, only an unidentifiable
document is refused), layered weakest first into one :class:`ResolvedAgent`, and exported
without the credentials of the MCP servers it bundles.
"""

from __future__ import annotations

from ._constants import (
    AGENT_SPEC,
    AGENT_SPEC_VERSION,
    AGENT_TASKS,
    RESOLVED_DEFAULTS,
    SPEC_EVENTS,
)
from ._export import export_spec
from ._load import DocumentSource, load_document
from ._parse import ParsedSpec, parse_spec
from ._resolve import ResolvedAgent, ResolvedEndpoint, ResolvedTask, resolve_agent_spec
from .schema import document_schema

__all__ = [
    "AGENT_SPEC",
    "AGENT_SPEC_VERSION",
    "AGENT_TASKS",
    "RESOLVED_DEFAULTS",
    "SPEC_EVENTS",
    "DocumentSource",
    "ParsedSpec",
    "ResolvedAgent",
    "ResolvedEndpoint",
    "ResolvedTask",
    "document_schema",
    "export_spec",
    "load_document",
    "parse_spec",
    "resolve_agent_spec",
]
