"""The JSON Schema (draft 2020-12) of an agent document, shipped for editors and validators.

The schema describes a document that parses with no warnings; :func:`parse_spec` stays the
authority, since it also accepts (and reports) documents the schema would reject.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

__all__ = ["SCHEMA_FILE", "document_schema"]

SCHEMA_FILE = "agent-document.schema.json"
"""The schema's file name inside this package."""


def document_schema() -> dict[str, Any]:
    """A fresh copy of the agent-document JSON Schema, loaded from the package data."""
    text = (
        resources.files("standardagents.documents")
        .joinpath(SCHEMA_FILE)
        .read_text(encoding="utf-8")
    )
    schema: dict[str, Any] = json.loads(text)
    return schema
