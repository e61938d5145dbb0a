"""``standardagents import`` and ``standardagents export``: agent documents to and from projects.

Import writes ordinary, readable project files (``define_*`` calls with keyword arguments),
so an imported agent is edited like any other; export reads a project agent back into a
document and checks that it parses before writing a byte.
"""

from __future__ import annotations

import ast
import json
import pprint
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from ..exceptions import DefinitionError
from ._export import export_spec
from ._load import load_document
from ._parse import parse_spec
from .bridge import (
    DocumentTranslation,
    agent_name_for,
    carried_keys,
    document_from_definitions,
    translate_document,
)

__all__ = [
    "EXTRAS_NAME",
    "export_command",
    "import_command",
    "project_files",
    "read_extras",
]

EXTRAS_NAME = "DOCUMENT_EXTRAS"
"""The constant in an imported agent file holding the document fields the runtime does not use."""

_WIDTH = 96


def _error(where: str, message: str) -> None:
    typer.echo(f"error: {where}: {message}" if where else f"error: {message}", err=True)


def _fail(problems: list[tuple[str, str]]) -> typer.Exit:
    for where, message in problems:
        _error(where, message)
    return typer.Exit(1)


def _warn(notes: list[str]) -> None:
    for note in notes:
        typer.echo(f"warning: {note}", err=True)


def _value(value: Any, indent: int) -> str:
    text = pprint.pformat(value, width=max(40, _WIDTH - indent), sort_dicts=False)
    return text.replace("\n", "\n" + " " * indent)


def _call(variable: str, function: str, fields: Mapping[str, Any]) -> str:
    lines = [f"{variable} = {function}("]
    for key, value in fields.items():
        lines.append(f"    {key}={_value(value, 4 + len(key) + 1)},")
    lines.append(")")
    return "\n".join(lines)


def _module(doc: str, function: str, body: list[str]) -> str:
    return "\n".join([f'"""{doc}"""', "", f"from standardagents import {function}", "", *body, ""])


def project_files(translation: DocumentTranslation) -> dict[Path, str]:
    """The project files for a translated document, relative to the project folder."""
    name = translation.agent.name
    agent_body: list[str] = []
    if translation.extras:
        agent_body += [f"{EXTRAS_NAME} = {_value(translation.extras, 0)}", "", ""]
    agent_body.append(_call("agent", "define_agent", translation.agent_fields))
    files = {
        Path("agents/agents") / f"{name}.py": _module(
            f"An imported agent document; {EXTRAS_NAME} keeps what export writes back.",
            "define_agent", agent_body),
        Path("agents/prompts") / f"{name}_prompt.py": _module(
            f"The system prompt of the {name} agent, imported from an agent document.",
            "define_prompt", [_call("prompt", "define_prompt", translation.prompt_fields)]),
    }
    if translation.model_fields is not None:
        files[Path("agents/models") / f"{name}_model.py"] = _module(
            f"The model of the {name} agent; its API key is read from the host's environment.",
            "define_model", [_call("model", "define_model", translation.model_fields)])
    return files


def read_extras(path: Path) -> dict[str, Any]:
    """The ``DOCUMENT_EXTRAS`` literal of an agent file (empty when it has none), read
    without running the file again."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == EXTRAS_NAME for target in node.targets
        ):
            try:
                value = ast.literal_eval(node.value)
            except ValueError as exc:
                raise DefinitionError([(EXTRAS_NAME, "must be a plain dict literal (JSON values only)")],
                                      source=str(path)) from exc
            if not isinstance(value, dict):
                raise DefinitionError([(EXTRAS_NAME, "must be a dict")], source=str(path))
            return value
    return {}


def import_command(
    doc: Annotated[Path, typer.Argument(help="The agent document (.json) to import.")],
    into: Annotated[Path, typer.Option("--into", help="The project folder to write into.")] = Path("."),
    layer: Annotated[list[Path] | None, typer.Option("--layer", help="Document layers beneath DOC (weakest first).")] = None,
    name: Annotated[str | None, typer.Option("--name", help="The agent's name (snake_case); default: from the document's id.")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace files that already exist.")] = False,
    force: Annotated[bool, typer.Option("--force", hidden=True, help="The former name of --overwrite.")] = False,
) -> None:
    """Write an agent document into a project as agent, prompt and model files."""
    try:
        resolved, warnings, sources = load_document(doc, list(layer or []), bundle=True)
        translation = translate_document(
            resolved, name=name or agent_name_for(resolved, doc.stem), carried=carried_keys(sources)
        )
    except DefinitionError as exc:
        raise _fail(exc.problems) from None
    _warn(warnings)
    _warn([f"{doc}: {note}" for note in translation.notes])
    extras = export_spec(translation.extras)
    if extras != translation.extras:
        _warn([f"{doc}: bundle.mcpServers: env and headers were not written into the project"])
    translation = DocumentTranslation(
        agent_fields=translation.agent_fields, prompt_fields=translation.prompt_fields,
        model_fields=translation.model_fields, agent=translation.agent, prompt=translation.prompt,
        model=translation.model, extras=extras, notes=translation.notes,
    )
    try:
        ast.literal_eval(_value(extras, 0))
    except ValueError:
        raise _fail([(str(doc), "holds a number (NaN or Infinity) that JSON does not allow")]) from None
    files = project_files(translation)
    existing = [path for path in files if (into / path).exists()]
    if existing and not (overwrite or force):
        raise _fail([(str(into / path), "already exists (use --overwrite to replace it)") for path in existing])
    for path, text in files.items():
        target = into / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        typer.echo(f"wrote {target}")
    typer.echo(f"imported agent {translation.agent.name!r}: standardagents run {into} "
               f"--agent {translation.agent.name} \"hello\"")


def export_command(
    project: Annotated[Path, typer.Argument(help="The project folder (the one holding agents/).")],
    agent: Annotated[str | None, typer.Option("--agent", "-a", help="The agent to export (needed when the project has several).")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write the document here instead of to stdout.")] = None,
    secrets: Annotated[bool, typer.Option("--secrets", help="Keep bundled servers' env and headers.")] = False,
) -> None:
    """Write a project agent as a cubicecho.agent/1 document (no API key is ever written)."""
    from ..project import DEFAULT_MODEL, load_project

    try:
        registry = load_project(project)
        names = registry.names("agents")
        chosen = agent or (names[0] if len(names) == 1 else "")
        if not chosen:
            raise DefinitionError([("--agent", f"choose an agent ({', '.join(names) or 'the project has none'})")])
        if not registry.has("agents", chosen):
            raise DefinitionError([("--agent", f"no agent {chosen!r} (the project has {', '.join(names) or 'none'})")])
        entry = registry.find("agents", chosen)
        definition = registry.get("agents", chosen)
        extras: dict[str, Any] = {}
        if entry is not None and entry.source and registry.root is not None:
            extras = read_extras(Path(registry.root) / entry.source)
        prompt = registry.get("prompts", definition.side_a.prompt)
        model_name = prompt.model or DEFAULT_MODEL
        model_entry = registry.find("models", model_name)
        model = None
        if model_entry is not None and model_entry.source != "(built-in)":
            model = registry.get("models", model_name)
        document, notes = document_from_definitions(
            definition, prompt, model, registry=registry, extras=extras
        )
    except DefinitionError as exc:
        raise _fail([(f"{exc.source}: {where}" if exc.source and where else exc.source or where, message)
                     for where, message in exc.problems]) from None
    document = export_spec(document, secrets=secrets)
    parsed = parse_spec(document, bundle=True)
    if not parsed.ok:
        raise _fail([("exported document", problem) for problem in parsed.errors])
    _warn(notes)
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        typer.echo(f"wrote {out}", err=True)
