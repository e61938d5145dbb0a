"""Reading a ``cubicecho.agent/1`` document: keep what is usable, refuse only what is unidentifiable.

A document arrives from a form, a file or another host, so anything at all may come in. Only
four problems refuse it (not an object, a wrong ``spec`` token, a ``requires`` entry the host
does not understand, a container of the wrong kind); every other bad value is dropped with a
warning so that one stale field never stops an otherwise good agent from loading.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._constants import (
    AGENT_SPEC,
    AGENT_SPEC_PREFIX,
    AGENT_SPEC_VERSION,
    INJECT_EVENTS,
    KNOWN_KEYS,
    RESERVED_BODY,
    SPEC_EVENTS,
    VETO_EVENT,
)

__all__ = ["ParsedSpec", "parse_spec"]

_VARIABLE = re.compile(r"\$\{[^}]*\}")
_MAJOR = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class ParsedSpec:
    """What :func:`parse_spec` returns: the surviving document, or ``None`` with the reasons."""

    spec: dict[str, Any] | None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the document was accepted (it may still carry warnings)."""
        return self.spec is not None


def _is_record(value: object) -> bool:
    return isinstance(value, Mapping)


def _is_array(value: object) -> bool:
    return isinstance(value, list | tuple)


def _is_number(value: object) -> bool:
    """A finite JSON number: bools are not numbers, and neither are NaN or infinities."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a double is infinite to any JSON reader
        return False


def _kept(**fields: Any) -> dict[str, Any]:
    """The fields that survived, so an absent one stays absent instead of becoming null."""
    return {key: value for key, value in fields.items() if value is not None}


class _Report:
    """Collects every problem in the order found, as ``(path, message)`` pairs."""

    def __init__(self) -> None:
        self.errors: list[tuple[str, str]] = []
        self.warnings: list[tuple[str, str]] = []

    def fail(self, path: str, problem: str) -> None:
        self.errors.append((path, problem))

    def drop(self, path: str, problem: str) -> None:
        self.warnings.append((path, f"{problem}, and was dropped"))

    def note(self, path: str, problem: str) -> None:
        self.warnings.append((path, problem))

    def string(self, path: str, value: object) -> str | None:
        """A string field; ``${VAR}`` is noted because this format never expands it."""
        if value is None:
            return None
        if not isinstance(value, str):
            self.drop(path, "must be a string")
            return None
        if _VARIABLE.search(value):
            self.note(path, "looks like a variable reference, but is kept as literal text")
        return value

    def number(
        self, path: str, value: object, least: float, most: float | None = None
    ) -> int | float | None:
        """A number in range; out-of-range values are dropped, never clamped to a guess."""
        if value is None:
            return None
        if not _is_number(value):
            self.drop(path, "must be a finite number")
            return None
        assert isinstance(value, int | float)
        if value < least or (most is not None and value > most):
            bound = f"at least {least}" if most is None else f"between {least} and {most}"
            self.drop(path, f"must be {bound}")
            return None
        return value

    def boolean(self, path: str, value: object) -> bool | None:
        if value is None:
            return None
        if not isinstance(value, bool):
            self.drop(path, "must be true or false")
            return None
        return value


def _endpoint(report: _Report, path: str, value: object) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        report.drop(path, "must be an object")
        return None
    endpoint = _kept(
        baseUrl=report.string(f"{path}.baseUrl", value.get("baseUrl")),
        requestTimeoutSeconds=report.number(
            f"{path}.requestTimeoutSeconds", value.get("requestTimeoutSeconds"), 0
        ),
        firstTokenSeconds=report.number(
            f"{path}.firstTokenSeconds", value.get("firstTokenSeconds"), 0
        ),
    )
    if value.get("apiKey") is not None or value.get("api_key") is not None:
        report.drop(
            f"{path}.apiKey", "is not part of this format, since a document carries no credentials"
        )
    return endpoint or None


def _model(report: _Report, value: object) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        report.drop("model", "must be an object")
        return None
    extra_body: dict[Any, Any] | None = None
    raw_body = value.get("extraBody")
    if raw_body is not None:
        if not isinstance(raw_body, Mapping):
            report.drop("model.extraBody", "must be an object")
        else:
            extra_body = {}
            for key, held in raw_body.items():
                if key in RESERVED_BODY:
                    report.drop(f"model.extraBody.{key}", "is always set by the loop itself")
                else:
                    extra_body[key] = held
    return _kept(
        model=report.string("model.model", value.get("model")),
        maxTokens=report.number("model.maxTokens", value.get("maxTokens"), 0),
        temperature=report.number("model.temperature", value.get("temperature"), 0, 2),
        reasoningEffort=report.string("model.reasoningEffort", value.get("reasoningEffort")),
        contextLength=report.number("model.contextLength", value.get("contextLength"), 0),
        extraBody=extra_body,
    )


def _prompt(report: _Report, value: list[Any] | tuple[Any, ...]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for index, held in enumerate(value):
        path = f"prompt[{index}]"
        if not isinstance(held, Mapping):
            report.drop(path, "must be an object")
            continue
        part_id = report.string(f"{path}.id", held.get("id"))
        if not part_id:
            report.drop(path, "has no id, which is what layers merge on")
            continue
        text = report.string(f"{path}.text", held.get("text"))
        ref: dict[str, str] | None = None
        raw_ref = held.get("ref")
        if raw_ref is not None:
            kind = raw_ref.get("type") if isinstance(raw_ref, Mapping) else None
            where = (
                report.string(f"{path}.ref.value", raw_ref.get("value"))
                if isinstance(raw_ref, Mapping)
                else None
            )
            if isinstance(kind, str) and kind in ("file", "url") and where:
                ref = {"type": kind, "value": where}
            else:
                report.drop(f"{path}.ref", 'must be {"type": "file" or "url", "value": "..."}')
        # An empty text is a deliberate value (it deletes the part below), unlike no text at all.
        if text is None and ref is None:
            report.drop(path, "has neither text nor a ref")
            continue
        parts.append(_kept(id=part_id, text=text, ref=ref))
    return parts


def _tools(report: _Report, value: object) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        report.drop("tools", "must be an object")
        return None
    discovery: str | None = None
    raw_discovery = value.get("discovery")
    if raw_discovery is not None:
        if isinstance(raw_discovery, str) and raw_discovery in ("eager", "ondemand"):
            discovery = raw_discovery
        else:
            report.drop("tools.discovery", 'must be "eager" or "ondemand"')
    servers: list[str] | None = None
    raw_servers = value.get("servers")
    if raw_servers is not None:
        if not _is_array(raw_servers):
            report.drop("tools.servers", "must be an array of server slugs")
        else:
            # [] is kept: it means "no servers", and reading it as absent would grant every one.
            servers = []
            for index, slug in enumerate(raw_servers):
                name = report.string(f"tools.servers[{index}]", slug)
                if name:
                    servers.append(name)
                elif name == "":
                    report.drop(f"tools.servers[{index}]", "is empty")
    return _kept(
        discovery=discovery,
        maxIterations=report.number("tools.maxIterations", value.get("maxIterations"), 1),
        servers=servers,
    )


def _retry(report: _Report, value: object) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        report.drop("retry", "must be an object")
        return None
    retry = _kept(
        maxRetries=report.number("retry.maxRetries", value.get("maxRetries"), 0),
        loadingTimeoutSeconds=report.number(
            "retry.loadingTimeoutSeconds", value.get("loadingTimeoutSeconds"), 0
        ),
    )
    return retry or None


def _tasks(report: _Report, value: Mapping[Any, Any]) -> dict[Any, dict[str, Any]]:
    tasks: dict[Any, dict[str, Any]] = {}
    for key, held in value.items():
        path = f"tasks.{key}"
        if held is None:
            continue
        if not isinstance(held, Mapping):
            report.drop(path, "must be an object")
            continue
        # Task names are open: a host may run side tasks this format has never heard of.
        tasks[key] = _kept(
            model=report.string(f"{path}.model", held.get("model")),
            endpoint=_endpoint(report, f"{path}.endpoint", held.get("endpoint")),
            maxTokens=report.number(f"{path}.maxTokens", held.get("maxTokens"), 0),
            temperature=report.number(f"{path}.temperature", held.get("temperature"), 0, 2),
            reasoningEffort=report.string(f"{path}.reasoningEffort", held.get("reasoningEffort")),
        )
    return tasks


def _hooks(
    report: _Report, value: list[Any] | tuple[Any, ...], events: Collection[str]
) -> list[dict[str, Any]]:
    hooks: list[dict[str, Any]] = []
    for index, held in enumerate(value):
        path = f"hooks[{index}]"
        if not isinstance(held, Mapping):
            report.drop(path, "must be an object")
            continue
        hook_id = report.string(f"{path}.id", held.get("id"))
        server = report.string(f"{path}.server", held.get("server"))
        tool = report.string(f"{path}.tool", held.get("tool"))
        on = report.string(f"{path}.on", held.get("on"))
        if not hook_id or not server or not tool or not on:
            report.drop(path, "needs an id, an event (on), a server and a tool")
            continue
        if on not in SPEC_EVENTS:
            report.drop(f"{path}.on", f'"{on}" is not a hook event')
            continue
        # Kept rather than refused, so an agent stays importable on a host lacking one event.
        if on not in events:
            report.note(f"{path}.on", f'"{on}" is never fired by this host')
        inject = report.boolean(f"{path}.inject", held.get("inject"))
        if inject and on not in INJECT_EVENTS:
            report.drop(f"{path}.inject", f'"{on}" fires after the model has answered')
            inject = None
        veto = report.boolean(f"{path}.veto", held.get("veto"))
        if veto and on != VETO_EVENT:
            report.drop(f"{path}.veto", f'"{on}" announces nothing a hook could decline')
            veto = None
        hooks.append(
            _kept(
                id=hook_id,
                on=on,
                server=server,
                tool=tool,
                args=held.get("args"),
                inject=inject,
                veto=veto,
                maxTokens=report.number(f"{path}.maxTokens", held.get("maxTokens"), 0),
                timeoutMs=report.number(f"{path}.timeoutMs", held.get("timeoutMs"), 0),
                enabled=report.boolean(f"{path}.enabled", held.get("enabled")),
            )
        )
    return hooks


def effective_slug(server: Mapping[Any, Any]) -> str | None:
    """A bundled server's name: a non-empty ``slug``, else a non-empty ``id``, else none."""
    slug = server.get("slug")
    if isinstance(slug, str) and slug:
        return slug
    server_id = server.get("id")
    if isinstance(server_id, str) and server_id:
        return server_id
    return None


def _bundle(report: _Report, value: object) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        report.drop("bundle", "must be an object")
        return None
    raw = value.get("mcpServers")
    if raw is None:
        return None
    if not _is_array(raw):
        report.drop("bundle.mcpServers", "must be an array")
        return None
    seen: set[str] = set()
    servers: list[Any] = []
    for index, held in enumerate(raw):
        path = f"bundle.mcpServers[{index}]"
        if not isinstance(held, Mapping):
            report.drop(path, "must be an object")
            continue
        slug = effective_slug(held)
        if slug is None:
            report.drop(path, "needs a non-empty id or slug")
            continue
        if slug in seen:
            report.drop(path, f'is a second server called "{slug}"')
            continue
        seen.add(slug)
        # Passed through whole: the server format belongs to the MCP pool, not to this one.
        servers.append(dict(held))
    return {"mcpServers": servers}


def _check_token(report: _Report, token: object) -> None:
    if token == AGENT_SPEC and isinstance(token, str):
        return
    if isinstance(token, str) and token.startswith(AGENT_SPEC_PREFIX):
        major = token[len(AGENT_SPEC_PREFIX) :]
        if _MAJOR.fullmatch(major):
            report.fail(
                "spec",
                f"is version {int(major)}, and this build reads version {AGENT_SPEC_VERSION}",
            )
            return
    report.fail("spec", f'must be "{AGENT_SPEC}"')


def parse(
    document: object,
    *,
    bundle: bool = False,
    events: Collection[str] | None = None,
    understands: Collection[str] | None = None,
) -> tuple[dict[str, Any] | None, _Report]:
    """The parser proper, keeping problems structured for callers that re-label them."""
    report = _Report()
    fired: Collection[str] = SPEC_EVENTS if events is None else events
    if not isinstance(document, Mapping):
        report.fail("spec", "must be an object")
        return None, report
    get = document.get
    _check_token(report, get("spec"))

    # The containers are judged before their contents: a prompt that is not a list is a
    # broken document, while one bad part inside a list is only a dropped value.
    prompt, tasks, hooks = get("prompt"), get("tasks"), get("hooks")
    if prompt is not None and not _is_array(prompt):
        report.fail("prompt", "must be an array")
    if tasks is not None and not _is_record(tasks):
        report.fail("tasks", "must be an object")
    if hooks is not None and not _is_array(hooks):
        report.fail("hooks", "must be an array")
    requires: list[str] | None = None
    raw_requires = get("requires")
    if raw_requires is not None:
        if not _is_array(raw_requires):
            report.fail("requires", "must be an array")
        else:
            requires = []
            for index, key in enumerate(raw_requires):
                if not isinstance(key, str):
                    report.fail(f"requires[{index}]", "must be a string")
                    continue
                # Fails closed, so an agent can insist on an extension it must not run without.
                if understands is not None and key not in understands:
                    report.fail(f"requires[{index}]", f'"{key}" is not understood by this host')
                requires.append(key)

    extensions: dict[Any, Any] | None = None
    raw_extensions = get("extensions")
    if raw_extensions is not None:
        if isinstance(raw_extensions, Mapping):
            extensions = dict(raw_extensions)
        else:
            report.drop("extensions", "must be an object")
    if get("bundle") is not None and not bundle:
        report.drop("bundle", "can start programs, so it is only read with bundle=True")

    spec: dict[Any, Any] = {"spec": AGENT_SPEC}
    spec.update(
        _kept(
            **{"$schema": report.string("$schema", get("$schema"))},
            id=report.string("id", get("id")),
            name=report.string("name", get("name")),
            description=report.string("description", get("description")),
            endpoint=_endpoint(report, "endpoint", get("endpoint")),
            model=_model(report, get("model")),
            prompt=_prompt(report, prompt) if isinstance(prompt, list | tuple) else None,
            tools=_tools(report, get("tools")),
            retry=_retry(report, get("retry")),
            tasks=_tasks(report, tasks) if isinstance(tasks, Mapping) else None,
            hooks=_hooks(report, hooks, fired) if isinstance(hooks, list | tuple) else None,
            bundle=_bundle(report, get("bundle")) if bundle else None,
            extensions=extensions,
            requires=requires,
        )
    )
    for key, held in document.items():
        if key in KNOWN_KEYS:
            continue
        # Carried, so a field from a later 1.x survives a host that cannot read it yet.
        report.note(str(key), "is not a key this version names, and was carried through unread")
        spec[key] = held
    return (None if report.errors else spec), report


def parse_spec(
    document: object,
    *,
    bundle: bool = False,
    events: Collection[str] | None = None,
    understands: Collection[str] | None = None,
) -> ParsedSpec:
    """Read ``document`` (any parsed JSON value), reporting every problem at once.

    ``bundle`` opts in to reading ``bundle.mcpServers`` (it can start programs); ``events``
    lists the hook events this host fires (default: all); ``understands`` lists the
    extension keys this host supports, and ``None`` skips that check.
    """
    spec, report = parse(document, bundle=bundle, events=events, understands=understands)
    return ParsedSpec(
        spec=spec,
        errors=[f"{path}: {problem}" for path, problem in report.errors],
        warnings=[f"{path}: {problem}" for path, problem in report.warnings],
    )
