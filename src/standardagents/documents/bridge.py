"""Turning an agent document into runtime definitions, and a project agent back into one.

A document describes one OpenAI-compatible agent; the runtime describes agents as agent,
prompt and model definitions. What the runtime cannot run (side tasks, MCP hooks, server
scoping) is never dropped silently: it is reported as a note and kept, document-shaped, in
``extras`` so an exported document carries it back.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..definitions import (
    AgentDefinition,
    ModelDefinition,
    PromptDefinition,
    PromptEnvPart,
    PromptIncludePart,
    PromptTextPart,
    define_agent,
    define_model,
    define_prompt,
)
from ..exceptions import DefinitionError
from ..registry import Registry
from ._constants import AGENT_SPEC, KNOWN_KEYS, RESOLVED_DEFAULTS
from ._load import load_document
from ._parse import parse_spec
from ._resolve import ResolvedAgent

__all__ = [
    "API_KEY_ENV",
    "DocumentTranslation",
    "agent_name_for",
    "carried_keys",
    "definitions_from_document",
    "document_from_definitions",
    "registry_from_document",
    "translate_document",
]

API_KEY_ENV = "OPENAI_API_KEY"
"""The variable a document's model reads its key from: the key is the host's, never the document's."""

PARAGRAPH = "\n\n"
"""How a document joins its prompt parts into the system prompt."""

_DOCUMENT_ORDER = (
    "spec", "$schema", "id", "name", "description", "endpoint", "model", "prompt", "tools",
    "retry", "tasks", "hooks", "bundle", "extensions", "requires",
)


def agent_name_for(resolved: ResolvedAgent, fallback: str = "agent") -> str:
    """A snake_case agent name from the document's id (else its name, else ``fallback``)."""
    for candidate in (resolved.id, resolved.name, fallback):
        slug = re.sub(r"[^a-z0-9]+", "_", candidate.lower()).strip("_")
        slug = re.sub(r"^[0-9_]+", "", slug)
        if slug:
            return slug
    return "agent"


def _whole(value: int | float, what: str, notes: list[str]) -> int | None:
    """A positive count as an int; 0 means "no limit" in a document and ``None`` here."""
    if value <= 0:
        return None
    if not float(value).is_integer():
        notes.append(f"{what}: {value} is not a whole number; {math.floor(value)} is used")
    return max(1, math.floor(value))


@dataclass(frozen=True)
class DocumentTranslation:
    """A resolved document as definitions: the keyword arguments, the definitions, and the rest.

    ``model`` is ``None`` when the document names no model or endpoint (the runtime's default
    model then answers). ``extras`` is document-shaped; ``notes`` say what will not run here.
    """

    agent_fields: dict[str, Any]
    prompt_fields: dict[str, Any]
    model_fields: dict[str, Any] | None
    agent: AgentDefinition
    prompt: PromptDefinition
    model: ModelDefinition | None
    extras: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def definitions(self) -> list[Any]:
        """Agent, prompt and (when there is one) model, ready for ``build_registry``."""
        found: list[Any] = [self.agent, self.prompt]
        if self.model is not None:
            found.append(self.model)
        return found


def _prompt_parts(
    resolved: ResolvedAgent, extras: dict[str, Any], notes: list[str]
) -> list[str]:
    """Text parts in order, each after the first opening with the paragraph break the
    document puts between parts, so the definition renders the document's system prompt."""
    texts: list[str] = []
    layout: list[dict[str, Any]] = []
    for part in resolved.prompt:
        text = part.get("text")
        if isinstance(text, str):
            if text.strip():
                texts.append(text.strip() if not texts else PARAGRAPH + text.strip())
                layout.append({"id": part["id"]})
            continue
        ref = part.get("ref") or {}
        notes.append(
            f"prompt part {part.get('id')!r} refers to a {ref.get('type')} ({ref.get('value')}) "
            "that this runtime does not fetch, so it is not in the system prompt"
        )
        layout.append(copy.deepcopy(part))
    if layout:
        extras["prompt"] = layout
    return texts


def _unsupported(resolved: ResolvedAgent, extras: dict[str, Any], notes: list[str]) -> None:
    """Keep, document-shaped, what the runtime cannot run, with a note for each."""
    if resolved.id:
        extras["id"] = resolved.id
    for key, task in resolved.tasks.items():
        spec: dict[str, Any] = {"model": task.model}
        if task.endpoint.base_url and task.endpoint.base_url != resolved.base_url:
            spec["endpoint"] = {"baseUrl": task.endpoint.base_url}
        for name, value in (
            ("maxTokens", task.max_tokens),
            ("temperature", task.temperature),
            ("reasoningEffort", task.reasoning_effort),
        ):
            if value is not None:
                spec[name] = value
        extras.setdefault("tasks", {})[key] = spec
        notes.append(f"tasks.{key}: side tasks are not run by this runtime")
    if resolved.hooks:
        extras["hooks"] = copy.deepcopy(list(resolved.hooks))
        for hook in resolved.hooks:
            notes.append(
                f"hooks: {hook.get('id')!r} ({hook.get('on')} -> {hook.get('server')}.{hook.get('tool')}) "
                "is an MCP hook, which this runtime does not run"
            )
    tools: dict[str, Any] = {}
    if resolved.max_tool_iterations != RESOLVED_DEFAULTS["maxToolIterations"]:
        tools["maxIterations"] = resolved.max_tool_iterations
        notes.append("tools.maxIterations: not applied by this runtime (agents stop by their own limits)")
    if resolved.servers is not None:
        tools["servers"] = list(resolved.servers)
        notes.append("tools.servers: MCP servers are not connected from a document by this runtime")
    if tools:
        extras["tools"] = tools
    if resolved.mcp_servers:
        extras["bundle"] = {"mcpServers": copy.deepcopy(list(resolved.mcp_servers))}
        notes.append("bundle.mcpServers: bundled MCP servers are not started by this runtime")
    retry: dict[str, Any] = {}
    if resolved.loading_timeout_seconds is not None:
        retry["loadingTimeoutSeconds"] = resolved.loading_timeout_seconds
        notes.append("retry.loadingTimeoutSeconds: not applied by this runtime")
    if retry:
        extras["retry"] = retry
    if resolved.first_token_seconds is not None:
        extras.setdefault("endpoint", {})["firstTokenSeconds"] = resolved.first_token_seconds
        notes.append("endpoint.firstTokenSeconds: not applied by this runtime")
    if resolved.reasoning_effort is not None:
        extras.setdefault("model", {})["reasoningEffort"] = resolved.reasoning_effort
        notes.append("model.reasoningEffort: not applied by this runtime (set it in model.extraBody)")
    if resolved.extensions:
        extras["extensions"] = copy.deepcopy(resolved.extensions)
    if resolved.requires:
        extras["requires"] = list(resolved.requires)


def translate_document(
    resolved: ResolvedAgent,
    *,
    name: str | None = None,
    carried: Mapping[str, Any] | None = None,
) -> DocumentTranslation:
    """Definitions for a resolved document, with notes and the document fields they cannot hold.

    ``carried`` holds the document's top-level keys this format version does not name (see
    :func:`carried_keys`); they go into ``extras`` untouched. Raises :class:`DefinitionError`
    when ``name`` is not a valid agent name.
    """
    notes: list[str] = []
    extras: dict[str, Any] = {}
    agent_name = name or agent_name_for(resolved)
    prompt_name = f"{agent_name}_prompt"
    model_name = f"{agent_name}_model"
    texts = _prompt_parts(resolved, extras, notes)
    _unsupported(resolved, extras, notes)
    for key, value in (carried or {}).items():
        extras[key] = copy.deepcopy(value)

    max_tokens = _whole(resolved.max_tokens, "model.maxTokens", notes)
    model_fields: dict[str, Any] | None = None
    prompt_fields: dict[str, Any] = {"name": prompt_name}
    if resolved.description:
        prompt_fields["description"] = resolved.description
    prompt_fields["prompt"] = texts[0] if len(texts) == 1 else texts
    if resolved.tool_discovery == "ondemand":
        prompt_fields["tool_discovery"] = "ondemand"
    if resolved.model and resolved.base_url:
        model_fields = {"name": model_name, "provider": "openai", "model": resolved.model,
                        "base_url": resolved.base_url, "api_key_env": API_KEY_ENV}
        if max_tokens is not None:
            model_fields["max_tokens"] = max_tokens
        model_fields["temperature"] = resolved.temperature
        context = _whole(resolved.context_length, "model.contextLength", notes)
        if context is not None:
            model_fields["context_window"] = context
        model_fields["max_retries"] = _whole(resolved.max_retries, "retry.maxRetries", notes) or 0
        if resolved.request_timeout_seconds:
            model_fields["timeout"] = resolved.request_timeout_seconds
        if resolved.extra_body:
            model_fields["extra_body"] = copy.deepcopy(resolved.extra_body)
        prompt_fields["model"] = model_name
    else:
        missing = " and ".join(
            label for label, value in (("model.model", resolved.model),
                                       ("endpoint.baseUrl", resolved.base_url)) if not value
        )
        notes.append(f"{missing}: not set, so the runtime's default model answers")
        # The model's own limits still apply; a prompt carries them for the default model.
        if max_tokens is not None:
            prompt_fields["max_tokens"] = max_tokens
        prompt_fields["temperature"] = resolved.temperature
        kept: dict[str, Any] = {"model": resolved.model} if resolved.model else {}
        if resolved.context_length:
            kept["contextLength"] = resolved.context_length
        if resolved.extra_body:
            kept["extraBody"] = copy.deepcopy(resolved.extra_body)
        if kept:
            extras["model"] = {**kept, **extras.get("model", {})}
        if resolved.base_url:
            extras["endpoint"] = {"baseUrl": resolved.base_url, **extras.get("endpoint", {})}
        if resolved.request_timeout_seconds is not None:
            extras.setdefault("endpoint", {})["requestTimeoutSeconds"] = resolved.request_timeout_seconds
        if resolved.max_retries:
            extras.setdefault("retry", {})["maxRetries"] = resolved.max_retries

    agent_fields: dict[str, Any] = {"name": agent_name, "type": "ai_human"}
    if resolved.name and resolved.name != agent_name:
        agent_fields["title"] = resolved.name
    if resolved.description:
        agent_fields["description"] = resolved.description
    agent_fields["side_a"] = {"prompt": prompt_name}

    agent = define_agent(**agent_fields)
    prompt = define_prompt(**prompt_fields)
    model = define_model(**model_fields) if model_fields is not None else None
    return DocumentTranslation(
        agent_fields=agent_fields,
        prompt_fields=prompt_fields,
        model_fields=model_fields,
        agent=agent,
        prompt=prompt,
        model=model,
        extras=extras,
        notes=notes,
    )


def definitions_from_document(resolved: ResolvedAgent, *, name: str | None = None) -> list[Any]:
    """An ai_human agent, its prompt and (when the document names one) its model."""
    return translate_document(resolved, name=name).definitions


def carried_keys(sources: Iterable[str | Path]) -> dict[str, Any]:
    """The top-level keys of these document files that the format does not name, later
    files winning, so an import keeps a field a newer format version added."""
    carried: dict[str, Any] = {}
    for source in sources:
        try:
            value = json.loads(Path(source).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(value, Mapping):
            carried.update({k: v for k, v in value.items() if k not in KNOWN_KEYS})
    return carried


def registry_from_document(
    path: str | Path, layers: Sequence[str | Path] = ()
) -> tuple[Registry, str, list[str]]:
    """A runtime registry holding the agent a document (over ``layers``) describes.

    Returns ``(registry, agent_name, notes)``: the notes are the document's parse warnings,
    each prefixed with its file and path, then what this runtime will not run. Raises
    :class:`DefinitionError` listing every error of every layer.
    """
    from ..project import build_registry

    resolved, warnings, _sources = load_document(path, list(layers))
    translation = translate_document(resolved, name=agent_name_for(resolved, Path(path).stem))
    registry = build_registry(*translation.definitions)
    notes = [*warnings, *(f"{path}: {note}" for note in translation.notes)]
    return registry, translation.agent.name, notes


# Export -----------------------------------------------------------------------------------


def _render_part(part: Any, registry: Registry | None, seen: tuple[str, ...],
                 notes: list[str]) -> str:
    if isinstance(part, PromptTextPart):
        return part.text
    if isinstance(part, PromptIncludePart):
        if registry is None or not registry.has("prompts", part.prompt):
            raise DefinitionError([("prompt", f"include of unknown prompt {part.prompt!r}")])
        inner = registry.get("prompts", part.prompt)
        return "".join(_render_prompt(inner, registry, seen, notes))
    if isinstance(part, PromptEnvPart):
        notes.append(
            f"prompt: env value {part.key!r} is only known inside a thread; "
            + (f"its default {part.default!r} was written" if part.default else "it was left out")
        )
        return part.default or ""
    raise DefinitionError([("prompt", f"unknown prompt part {part!r}")])


def _render_prompt(prompt: PromptDefinition, registry: Registry | None,
                   seen: tuple[str, ...], notes: list[str]) -> list[str]:
    """The prompt as rendered chunks, one per part; includes are rendered in place."""
    if prompt.name in seen:
        raise DefinitionError([("prompt", f"include cycle: {' -> '.join((*seen, prompt.name))}")])
    if isinstance(prompt.prompt, str):
        return [prompt.prompt]
    return [_render_part(part, registry, (*seen, prompt.name), notes) for part in prompt.prompt]


def _document_parts(chunks: list[str], layout: list[Any] | None) -> list[dict[str, Any]]:
    """Document prompt parts: one per chunk when the chunks are the paragraphs a document
    would join them into, else one part holding the whole rendered text."""
    whole = "".join(chunks)
    paragraphs = [chunk.strip() for chunk in chunks if chunk.strip()]
    if PARAGRAPH.join(paragraphs) != whole.strip():
        paragraphs = [whole.strip()] if whole.strip() else []
    slots = [entry for entry in layout or [] if isinstance(entry, Mapping) and entry.get("id")]
    parts: list[dict[str, Any]] = []
    used: set[str] = set()
    texts = iter(paragraphs)
    for entry in slots:
        if "ref" in entry and "text" not in entry:
            parts.append(copy.deepcopy(dict(entry)))
            used.add(str(entry["id"]))
            continue
        text = next(texts, None)
        if text is None:
            continue
        parts.append({"id": entry["id"], "text": text})
        used.add(str(entry["id"]))
    for index, text in enumerate(texts, start=1):
        part_id = "system" if not parts and index == 1 else f"part-{index}"
        while part_id in used:
            part_id += "-x"
        used.add(part_id)
        parts.append({"id": part_id, "text": text})
    return parts


def document_from_definitions(
    agent: AgentDefinition,
    prompt: PromptDefinition,
    model: ModelDefinition | None,
    *,
    registry: Registry | None = None,
    extras: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """A ``cubicecho.agent/1`` document for a project agent, and notes on what it lost.

    ``model`` is ``None`` for the runtime's default model (the document then names none);
    ``extras`` are the document fields an import kept. The API key is never written.
    """
    notes: list[str] = []
    if agent.type != "ai_human":
        raise DefinitionError([("type", f"agent {agent.name!r} is {agent.type}; a document describes one AI side talking with a person")])
    rest = copy.deepcopy(dict(extras or {}))
    doc: dict[str, Any] = {"spec": AGENT_SPEC}
    doc["id"] = rest.pop("id", None) or agent.name
    doc["name"] = agent.title or agent.name
    description = agent.description or prompt.description
    if description:
        doc["description"] = description
    endpoint: dict[str, Any] = dict(rest.pop("endpoint", None) or {})
    model_section: dict[str, Any] = dict(rest.pop("model", None) or {})
    retry: dict[str, Any] = dict(rest.pop("retry", None) or {})
    tools: dict[str, Any] = dict(rest.pop("tools", None) or {})
    layout = rest.pop("prompt", None)
    if model is not None and model.provider == "test":
        notes.append(f"model {model.name!r} is the offline test model, so the document names no model")
        model = None
    if model is not None:
        if model.provider != "openai":
            notes.append(f"model {model.name!r} uses the {model.provider} provider; "
                         "a document's endpoint is OpenAI-compatible")
        model_section["model"] = model.model
        if model.base_url:
            endpoint = {"baseUrl": model.base_url, **endpoint}
        if model.max_tokens is not None:
            model_section["maxTokens"] = model.max_tokens
        if model.temperature is not None:
            model_section["temperature"] = model.temperature
        if model.context_window is not None:
            model_section["contextLength"] = model.context_window
        if model.extra_body:
            model_section["extraBody"] = copy.deepcopy(model.extra_body)
        if model.timeout is not None:
            endpoint["requestTimeoutSeconds"] = model.timeout
        retry["maxRetries"] = model.max_retries
        if model.fallbacks:
            notes.append(f"model {model.name!r}: fallbacks {model.fallbacks} have no place in a document")
    # A prompt's own limits win at run time, so they are what the document says.
    if prompt.max_tokens is not None:
        model_section["maxTokens"] = prompt.max_tokens
    if prompt.temperature is not None:
        model_section["temperature"] = prompt.temperature
    if prompt.tool_discovery == "ondemand":
        tools["discovery"] = "ondemand"
    if prompt.tool_names():
        notes.append(f"prompt {prompt.name!r}: its tools {prompt.tool_names()} are Python tools, "
                     "which a document cannot carry")
    if agent.hooks or prompt.hooks:
        notes.append(f"agent {agent.name!r}: Python hooks are not carried by a document")
    if prompt.output_type is not None:
        notes.append(f"prompt {prompt.name!r}: its output_type is not carried (a document has no output schema)")
    if agent.usage_limits is not None:
        notes.append(f"agent {agent.name!r}: its usage_limits are not carried by a document")
    parts = _document_parts(_render_prompt(prompt, registry, (), notes), layout)
    for key, value in (("endpoint", endpoint), ("model", model_section), ("prompt", parts),
                       ("tools", tools), ("retry", retry)):
        if value:
            doc[key] = value
    doc.update(rest)
    ordered = {key: doc[key] for key in _DOCUMENT_ORDER if key in doc}
    ordered.update({key: value for key, value in doc.items() if key not in ordered})
    parsed = parse_spec(ordered, bundle=True)
    if not parsed.ok:
        raise DefinitionError([("document", problem) for problem in parsed.errors],
                              source=f"agent {agent.name!r}")
    return ordered, notes
