"""Layering parsed documents into the one flat agent configuration a run uses.

Only an absent field inherits: ``0``, ``""``, ``-1`` and ``[]`` are values that mean what they
say. Layers come weakest first (host settings, then the agent, then a task, then a step), and
nothing is ever fetched: which documents to layer is the host's decision.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._constants import RESOLVED_DEFAULTS
from ._parse import effective_slug

__all__ = ["ResolvedAgent", "ResolvedEndpoint", "ResolvedTask", "resolve_agent_spec"]

_ENDPOINT_KEYS = ("baseUrl", "requestTimeoutSeconds", "firstTokenSeconds")


def _present(mapping: Mapping[str, Any], key: str) -> bool:
    """Whether a layer said something for ``key``; JSON null reads as saying nothing."""
    return mapping.get(key) is not None


def _section(layer: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = layer.get(key)
    return value if isinstance(value, Mapping) else {}


def _items(layer: Mapping[str, Any], key: str) -> list[Any]:
    value = layer.get(key)
    return list(value) if isinstance(value, list | tuple) else []


def _merge_endpoints(endpoints: Iterable[Mapping[str, Any] | None]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for endpoint in endpoints:
        if not isinstance(endpoint, Mapping):
            continue
        for key in _ENDPOINT_KEYS:
            if _present(endpoint, key):
                merged[key] = endpoint[key]
    return merged


@dataclass(frozen=True)
class ResolvedEndpoint:
    """Where a model is reached. ``api_key`` is always empty: documents carry no credentials."""

    base_url: str = ""
    api_key: str = ""
    request_timeout_seconds: float | None = None
    first_token_seconds: float | None = None

    @classmethod
    def _from_spec(cls, endpoint: Mapping[str, Any]) -> ResolvedEndpoint:
        return cls(
            base_url=endpoint.get("baseUrl") or "",
            request_timeout_seconds=endpoint.get("requestTimeoutSeconds"),
            first_token_seconds=endpoint.get("firstTokenSeconds"),
        )

    def to_dict(self) -> dict[str, Any]:
        """The camelCase object, leaving out the timeouts no layer set."""
        out: dict[str, Any] = {"baseUrl": self.base_url, "apiKey": self.api_key}
        if self.request_timeout_seconds is not None:
            out["requestTimeoutSeconds"] = self.request_timeout_seconds
        if self.first_token_seconds is not None:
            out["firstTokenSeconds"] = self.first_token_seconds
        return out


@dataclass(frozen=True)
class ResolvedTask:
    """One side task that some layer configured and no layer declined."""

    model: str
    endpoint: ResolvedEndpoint
    max_tokens: int | float | None = None
    temperature: int | float | None = None
    reasoning_effort: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The camelCase object, leaving out what no layer set."""
        out: dict[str, Any] = {"model": self.model, "endpoint": self.endpoint.to_dict()}
        for key, value in (
            ("maxTokens", self.max_tokens),
            ("temperature", self.temperature),
            ("reasoningEffort", self.reasoning_effort),
        ):
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True)
class ResolvedAgent:
    """The flat configuration layered documents resolve to.

    Optional fields are ``None`` when no layer set them; ``servers`` keeps its three meanings
    (``None`` is every server the host offers, ``()`` is none, otherwise exactly those).
    ``prompt``, ``hooks`` and ``mcp_servers`` hold document-shaped (camelCase) dicts.
    """

    id: str
    name: str
    description: str
    base_url: str
    api_key: str
    model: str
    max_tokens: int | float
    temperature: int | float
    context_length: int | float
    tool_discovery: str
    tool_select_model: str
    max_tool_iterations: int | float
    max_retries: int | float
    system_prompt: str
    prompt: tuple[dict[str, Any], ...] = ()
    tasks: dict[str, ResolvedTask] = field(default_factory=dict)
    hooks: tuple[dict[str, Any], ...] = ()
    mcp_servers: tuple[dict[str, Any], ...] = ()
    extensions: dict[str, Any] = field(default_factory=dict)
    requires: tuple[str, ...] = ()
    servers: tuple[str, ...] | None = None
    request_timeout_seconds: int | float | None = None
    first_token_seconds: int | float | None = None
    loading_timeout_seconds: int | float | None = None
    reasoning_effort: str | None = None
    extra_body: dict[str, Any] | None = None

    @property
    def endpoint(self) -> ResolvedEndpoint:
        """The agent's own endpoint as one value, the shape a task's endpoint has."""
        return ResolvedEndpoint(
            base_url=self.base_url,
            api_key=self.api_key,
            request_timeout_seconds=self.request_timeout_seconds,
            first_token_seconds=self.first_token_seconds,
        )

    def to_dict(self) -> dict[str, Any]:
        """The camelCase object of the format, leaving out optional fields no layer set."""
        out: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "baseUrl": self.base_url,
            "apiKey": self.api_key,
        }
        optional = (
            ("requestTimeoutSeconds", self.request_timeout_seconds),
            ("firstTokenSeconds", self.first_token_seconds),
            ("loadingTimeoutSeconds", self.loading_timeout_seconds),
            ("reasoningEffort", self.reasoning_effort),
            ("extraBody", copy.deepcopy(self.extra_body)),
            ("servers", None if self.servers is None else list(self.servers)),
        )
        out.update({key: value for key, value in optional if value is not None})
        out.update(
            {
                "model": self.model,
                "maxTokens": self.max_tokens,
                "temperature": self.temperature,
                "contextLength": self.context_length,
                "toolDiscovery": self.tool_discovery,
                "toolSelectModel": self.tool_select_model,
                "maxToolIterations": self.max_tool_iterations,
                "maxRetries": self.max_retries,
                "systemPrompt": self.system_prompt,
                "prompt": copy.deepcopy(list(self.prompt)),
                "tasks": {key: task.to_dict() for key, task in self.tasks.items()},
                "hooks": copy.deepcopy(list(self.hooks)),
                "mcpServers": copy.deepcopy(list(self.mcp_servers)),
                "extensions": copy.deepcopy(self.extensions),
                "requires": list(self.requires),
            }
        )
        return out


def _merge_by_id(entries: Iterable[Mapping[str, Any]], key_of: Any) -> dict[Any, dict[str, Any]]:
    """Same key merges field by field; a new key is appended, so order is first appearance."""
    merged: dict[Any, dict[str, Any]] = {}
    for entry in entries:
        if not isinstance(entry, Mapping):
            continue
        key = key_of(entry)
        if key is None or key == "":
            continue
        base = merged.get(key, {})
        merged[key] = {**base, **{k: v for k, v in entry.items() if v is not None}}
    return merged


def _last_truthy(layers: Sequence[Mapping[str, Any]], key: str) -> str | None:
    for layer in reversed(layers):
        value = layer.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def resolve_agent_spec(layers: Iterable[Mapping[str, Any]]) -> ResolvedAgent:
    """Layer parsed documents, weakest first, into one :class:`ResolvedAgent`.

    Scalars take the last layer that has them; ``extraBody`` and ``extensions`` merge by key;
    ``prompt``, ``hooks`` and ``tasks`` merge by id in order of first appearance;
    ``tools.servers`` is replaced whole; ``requires`` is unioned; ``api_key`` is always empty
    so a document can never direct this host's own key to an endpoint it names.
    """
    stack = [layer for layer in layers if isinstance(layer, Mapping)]

    endpoint = _merge_endpoints(layer.get("endpoint") for layer in stack)

    model: dict[str, Any] = {}
    extra_body: dict[str, Any] = {}
    for layer in stack:
        for key, value in _section(layer, "model").items():
            if value is None:
                continue
            if key == "extraBody":
                if isinstance(value, Mapping):
                    extra_body.update(value)
            else:
                model[key] = value

    parts = _merge_by_id(
        (part for layer in stack for part in _items(layer, "prompt")), lambda p: p.get("id")
    )

    tools: dict[str, Any] = {}
    retry: dict[str, Any] = {}
    for layer in stack:
        layer_tools = _section(layer, "tools")
        for key in ("discovery", "maxIterations"):
            if _present(layer_tools, key):
                tools[key] = layer_tools[key]
        # Replaced, never unioned: "these two" united with "none" would silently widen access.
        if isinstance(layer_tools.get("servers"), list | tuple):
            tools["servers"] = tuple(layer_tools["servers"])
        layer_retry = _section(layer, "retry")
        for key in ("maxRetries", "loadingTimeoutSeconds"):
            if _present(layer_retry, key):
                retry[key] = layer_retry[key]

    merged_tasks: dict[Any, dict[str, Any]] = {}
    for layer in stack:
        for key, task in _section(layer, "tasks").items():
            if not isinstance(task, Mapping):
                continue
            before = merged_tasks.get(key, {})
            merged_tasks[key] = {
                **before,
                **{k: v for k, v in task.items() if v is not None},
                "endpoint": _merge_endpoints([before.get("endpoint"), task.get("endpoint")]),
            }
    tasks: dict[str, ResolvedTask] = {}
    for key, task in merged_tasks.items():
        task_model = task.get("model")
        # An empty model is how a layer declines a task configured beneath it.
        if not isinstance(task_model, str) or not task_model:
            continue
        tasks[key] = ResolvedTask(
            model=task_model,
            endpoint=ResolvedEndpoint._from_spec(_merge_endpoints([endpoint, task["endpoint"]])),
            max_tokens=task.get("maxTokens"),
            temperature=task.get("temperature"),
            reasoning_effort=task.get("reasoningEffort"),
        )

    hooks = _merge_by_id(
        (hook for layer in stack for hook in _items(layer, "hooks")), lambda h: h.get("id")
    )
    servers = _merge_by_id(
        (server for layer in stack for server in _items(_section(layer, "bundle"), "mcpServers")),
        effective_slug,
    )

    extensions: dict[str, Any] = {}
    requires: dict[str, None] = {}
    for layer in stack:
        extensions.update(_section(layer, "extensions"))
        for key in _items(layer, "requires"):
            if isinstance(key, str):
                requires.setdefault(key, None)

    agent_id = _last_truthy(stack, "id") or ""
    prompt = tuple(copy.deepcopy(list(parts.values())))
    system_prompt = "\n\n".join(
        text
        for text in (
            part["text"].strip() if isinstance(part.get("text"), str) else "" for part in prompt
        )
        if text
    )
    tool_select = tasks.get("toolSelect")
    return ResolvedAgent(
        id=agent_id,
        name=_last_truthy(stack, "name") or agent_id,
        description=_last_truthy(stack, "description") or "",
        base_url=endpoint.get("baseUrl", ""),
        api_key="",
        model=model.get("model", ""),
        max_tokens=model.get("maxTokens", RESOLVED_DEFAULTS["maxTokens"]),
        temperature=model.get("temperature", RESOLVED_DEFAULTS["temperature"]),
        context_length=model.get("contextLength", RESOLVED_DEFAULTS["contextLength"]),
        tool_discovery=tools.get("discovery", RESOLVED_DEFAULTS["toolDiscovery"]),
        tool_select_model=tool_select.model if tool_select else "",
        max_tool_iterations=tools.get("maxIterations", RESOLVED_DEFAULTS["maxToolIterations"]),
        max_retries=retry.get("maxRetries", RESOLVED_DEFAULTS["maxRetries"]),
        system_prompt=system_prompt,
        prompt=prompt,
        tasks=tasks,
        hooks=tuple(copy.deepcopy(list(hooks.values()))),
        mcp_servers=tuple(copy.deepcopy(list(servers.values()))),
        extensions=copy.deepcopy(extensions),
        requires=tuple(requires),
        servers=tools.get("servers"),
        request_timeout_seconds=endpoint.get("requestTimeoutSeconds"),
        first_token_seconds=endpoint.get("firstTokenSeconds"),
        loading_timeout_seconds=retry.get("loadingTimeoutSeconds"),
        reasoning_effort=model.get("reasoningEffort"),
        extra_body=copy.deepcopy(extra_body) if extra_body else None,
    )
