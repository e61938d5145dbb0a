"""Loading agent documents from files or dicts, with every problem of every layer reported."""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..exceptions import DefinitionError
from ._parse import parse
from ._resolve import ResolvedAgent, resolve_agent_spec

__all__ = ["DocumentSource", "load_document"]

DocumentSource = str | os.PathLike[str] | Mapping[str, Any]
"""A path to a JSON file, or a document already parsed from JSON."""


def _read(source: DocumentSource, label: str) -> tuple[str, object, tuple[str, str] | None]:
    """The source's label, its JSON value, and a problem when it could not be read."""
    if isinstance(source, Mapping):
        return label, source, None
    path = Path(source)
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        return name, None, ("", f"cannot be read ({exc.strerror or exc})")
    except UnicodeDecodeError:
        return name, None, ("", "is not UTF-8 text")
    try:
        return name, json.loads(text), None
    except json.JSONDecodeError as exc:
        return (
            name,
            None,
            ("", f"is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"),
        )


def load_document(
    source: DocumentSource,
    layers: Iterable[DocumentSource] = (),
    *,
    bundle: bool = False,
    events: Collection[str] | None = None,
    understands: Collection[str] | None = None,
) -> tuple[ResolvedAgent, list[str], list[str]]:
    """Read, parse and resolve ``source`` on top of ``layers`` (weakest first).

    Returns ``(agent, warnings, sources)``: each warning is prefixed with the file it came
    from, and ``sources`` names every layer in the order it was resolved (``source`` last).
    Raises :class:`DefinitionError` listing every error of every layer when any has one.
    Dict sources are named ``layers[i]`` and ``document``.
    """
    labelled = [(item, f"layers[{index}]") for index, item in enumerate(layers)]
    labelled.append((source, "document"))
    problems: list[tuple[str, str]] = []
    warnings: list[str] = []
    specs: list[dict[str, Any]] = []
    names: list[str] = []
    for item, fallback in labelled:
        name, value, unreadable = _read(item, fallback)
        names.append(name)
        if unreadable is not None:
            problems.append((name, unreadable[1]))
            continue
        spec, report = parse(value, bundle=bundle, events=events, understands=understands)
        problems.extend((f"{name}: {path}", problem) for path, problem in report.errors)
        warnings.extend(f"{name}: {path}: {problem}" for path, problem in report.warnings)
        if spec is not None:
            specs.append(spec)
    if problems:
        raise DefinitionError(problems)
    return resolve_agent_spec(specs), warnings, names
