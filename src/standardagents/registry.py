"""Namespaced lookup of definitions, with the spec's visibility rules.

Global code (the project's own files) sees every unpacked definition and each package's
entry agents. Code inside a package sees its own package whole, and only the entry agents
of other packages. Entries may be lazy: an async loader imported on first use.

A bare name resolves to the caller's own definition first; a visible definition of another
package may always be named ``package/name``, which is how :meth:`Registry.public_name`
lists it when its bare name is shared (a packed agent called like a project agent).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .exceptions import NotFoundError

__all__ = ["GLOBAL", "KINDS", "Entry", "Registry"]

GLOBAL: str | None = None
KINDS = ("agents", "prompts", "tools", "models", "hooks", "effects", "thread_endpoints", "controllers", "mcp",
         "user_endpoints", "providers", "authorizations", "schedules", "webhooks")
_SINGULAR = {"agents": "agent", "prompts": "prompt", "tools": "tool", "models": "model", "hooks": "hook",
             "effects": "effect", "thread_endpoints": "thread endpoint", "controllers": "controller",
             "mcp": "MCP server", "user_endpoints": "user endpoint", "providers": "provider",
             "authorizations": "authorization handler", "schedules": "schedule", "webhooks": "webhook"}


@dataclass(slots=True)
class Entry:
    """One registered definition (or its lazy loader) and where it came from."""

    kind: str
    name: str
    value: Any = None
    loader: Callable[[], Awaitable[Any]] | None = None
    package: str | None = None
    entry_point: bool = False
    source: str | None = None

    @property
    def loaded(self) -> bool:
        return self.loader is None


class Registry:
    """All definitions a runtime knows, keyed by (kind, package, name)."""

    def __init__(self) -> None:
        self._entries: dict[str, dict[tuple[str | None, str], Entry]] = {k: {} for k in KINDS}
        self.root: Any = None  # the project folder, when loaded from one
        self.packages: dict[str, Any] = {}

    # registration -------------------------------------------------------------------------
    def add(self, kind: str, name: str, value: Any = None, *, package: str | None = None,
            loader: Callable[[], Awaitable[Any]] | None = None, entry_point: bool = False,
            source: str | None = None) -> Entry:
        entry = Entry(kind, name, value, loader, package, entry_point, source)
        self._entries[kind][(package, name)] = entry
        return entry

    def remove(self, kind: str, name: str, *, package: str | None = None) -> None:
        self._entries[kind].pop((package, name), None)

    # visibility ---------------------------------------------------------------------------
    @staticmethod
    def visible(entry: Entry, namespace: str | None) -> bool:
        """Whether code in ``namespace`` (None = global) may see ``entry``."""
        if entry.package is None:
            return namespace is None
        if entry.package == namespace:
            return True
        return entry.kind == "agents" and entry.entry_point

    def find(self, kind: str, name: str, namespace: str | None = GLOBAL) -> Entry | None:
        """The visible entry for ``name``: the namespace's own first, then entry agents.

        ``package/name`` names one package's definition, when visible from ``namespace``.
        """
        table = self._entries[kind]
        if "/" in name:  # controllers' own names may hold slashes too ("items/[id]")
            package, _, bare = name.rpartition("/")
            entry = table.get((package, bare))
            if entry is not None and self.visible(entry, namespace):
                return entry
        own = table.get((namespace, name))
        if own is not None:
            return own
        if kind == "agents":
            for (pkg, n), entry in table.items():
                if n == name and entry.entry_point and pkg != namespace and pkg is not None:
                    return entry
        return None

    def get(self, kind: str, name: str, namespace: str | None = GLOBAL) -> Any:
        """A loaded definition, or NotFoundError (lazy entries must be loaded with ``aget``)."""
        entry = self.find(kind, name, namespace)
        if entry is None:
            raise NotFoundError(_SINGULAR[kind], name, self._hint(kind, namespace))
        if entry.loader is not None:
            raise NotFoundError(_SINGULAR[kind], name, "not loaded yet (use aget)")
        return entry.value

    async def aget(self, kind: str, name: str, namespace: str | None = GLOBAL) -> Any:
        """A definition, importing a lazy one on first use."""
        entry = self.find(kind, name, namespace)
        if entry is None:
            raise NotFoundError(_SINGULAR[kind], name, self._hint(kind, namespace))
        if entry.loader is not None:
            value = entry.loader()
            if inspect.isawaitable(value):
                value = await value
            value = getattr(value, "default", value)
            entry.value = value
            entry.loader = None
        return entry.value

    def has(self, kind: str, name: str, namespace: str | None = GLOBAL) -> bool:
        return self.find(kind, name, namespace) is not None

    def entries(self, kind: str, namespace: str | None = GLOBAL) -> list[Entry]:
        """Entries visible from ``namespace``, own ones first."""
        return [e for e in self._entries[kind].values() if self.visible(e, namespace)]

    def names(self, kind: str, namespace: str | None = GLOBAL) -> list[str]:
        """What code in ``namespace`` may call each visible definition (see :meth:`public_name`)."""
        return sorted({self.public_name(e, namespace) for e in self.entries(kind, namespace)})

    def public_name(self, entry: Entry, namespace: str | None = GLOBAL) -> str:
        """The name that addresses ``entry`` from ``namespace`` without ambiguity.

        The bare name when no other visible definition shares it, or when ``entry`` is the
        namespace's own (own definitions win the bare name); else ``package/name``.
        """
        if entry.package is None or entry.package == namespace:
            return entry.name
        shared = any(other is not entry and other.name == entry.name for other in self.entries(entry.kind, namespace))
        return f"{entry.package}/{entry.name}" if shared else entry.name

    def clashes(self, kind: str, namespace: str | None = GLOBAL) -> list[list[Entry]]:
        """Groups of visible entries sharing one bare name, each group in registration order."""
        groups: dict[str, list[Entry]] = {}
        for entry in self.entries(kind, namespace):
            groups.setdefault(entry.name, []).append(entry)
        return [group for group in groups.values() if len(group) > 1]

    def all_entries(self, kind: str) -> list[Entry]:
        return list(self._entries[kind].values())

    def namespace_of(self, kind: str, name: str, namespace: str | None = GLOBAL) -> str | None:
        entry = self.find(kind, name, namespace)
        return entry.package if entry else namespace

    def _hint(self, kind: str, namespace: str | None) -> str:
        names = self.names(kind, namespace)
        if not names:
            return f"no {kind} are defined"
        return "known: " + ", ".join(names[:20]) + (" ..." if len(names) > 20 else "")
