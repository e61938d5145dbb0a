"""Namespaces: tuples of labels, stored dotted (``("user", "u1", "prefs")`` is ``user.u1.prefs``).

Labels are non-empty strings without dots, as in LangGraph's store, so the dotted form is
one-to-one and a prefix search is one indexed ``LIKE``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._errors import MemoryInputError

__all__ = ["MAX_DEPTH", "MAX_LABEL", "Namespace", "check_key", "check_namespace", "dotted", "owner_of", "parse_dotted"]

Namespace = tuple[str, ...]
#: the most labels a namespace may have, and the longest label
MAX_DEPTH = 10
MAX_LABEL = 100
MAX_KEY = 255


def check_namespace(value: Any, *, field: str = "namespace", allow_empty: bool = False) -> Namespace:
    """``value`` as a namespace tuple, or :class:`MemoryInputError` naming what is wrong."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise MemoryInputError(f"{field} must be a list of strings such as [\"user\", \"u1\", \"notes\"], "
                               f"not {type(value).__name__} {value!r}")
    labels = tuple(value)
    if not labels and not allow_empty:
        raise MemoryInputError(f"{field} must have at least one label")
    if len(labels) > MAX_DEPTH:
        raise MemoryInputError(f"{field} has {len(labels)} labels; at most {MAX_DEPTH}")
    for i, label in enumerate(labels):
        if not isinstance(label, str) or not label:
            raise MemoryInputError(f"{field}[{i}] must be a non-empty string, not {label!r}")
        if "." in label:
            raise MemoryInputError(f"{field}[{i}] {label!r} contains a '.', which namespaces cannot hold")
        if len(label) > MAX_LABEL or "\x00" in label:
            raise MemoryInputError(f"{field}[{i}] is longer than {MAX_LABEL} characters or holds a NUL")
    return labels


def check_key(key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise MemoryInputError(f"key must be a non-empty string, not {key!r}")
    if len(key) > MAX_KEY or "\x00" in key:
        raise MemoryInputError(f"key is longer than {MAX_KEY} characters or holds a NUL")
    return key


def dotted(namespace: Namespace) -> str:
    return ".".join(namespace)


def parse_dotted(text: str, *, field: str = "namespace") -> Namespace:
    """A namespace from its dotted form (``a.b``), checked."""
    return check_namespace(text.split(".") if text else [], field=field)


def owner_of(namespace: Namespace) -> str | None:
    """The user a namespace belongs to: ``("user", id, ...)`` is ``id``'s."""
    return namespace[1] if len(namespace) >= 2 and namespace[0] == "user" else None
