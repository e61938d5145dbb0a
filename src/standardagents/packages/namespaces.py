"""Namespace contexts and the spec's visibility table, as plain functions.

Global code sees unpacked definitions and every package's entry agents; code inside a
package sees its own package whole and only the entry agents of other packages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

__all__ = [
    "GlobalNamespaceContext",
    "NamespaceContext",
    "PackedNamespaceContext",
    "belongs_to_package",
    "global_namespace",
    "is_packed",
    "is_visible_in_namespace",
    "namespace_context",
    "namespace_key",
    "packed_namespace",
    "signature_of",
]


class GlobalNamespaceContext(TypedDict):
    """Where unpacked (project) code runs."""

    type: Literal["global"]


class PackedNamespaceContext(TypedDict):
    """Where code of one package runs."""

    type: Literal["packed"]
    packageId: str


NamespaceContext = GlobalNamespaceContext | PackedNamespaceContext


def global_namespace() -> GlobalNamespaceContext:
    return {"type": "global"}


def packed_namespace(package_id: str) -> PackedNamespaceContext:
    return {"type": "packed", "packageId": package_id}


def namespace_context(key: str | None) -> NamespaceContext:
    """The context for a registry namespace key (None is global, else a package id)."""
    return global_namespace() if key is None else packed_namespace(key)


def namespace_key(context: NamespaceContext | str | None) -> str | None:
    """The registry namespace key for a context (accepts a key unchanged)."""
    if context is None or isinstance(context, str):
        return context
    if context.get("type") == "global":
        return None
    if context.get("type") == "packed" and context.get("packageId"):
        return str(context["packageId"])  # type: ignore[typeddict-item]
    raise ValueError(f"not a namespace context: {context!r} (expected type 'global' or 'packed' with a packageId)")


def signature_of(metadata: Any) -> Mapping[str, Any] | None:
    """The package signature of a definition or ``PackedMetadata`` mapping, if it has one.

    Accepts a definition (its ``package`` field), a mapping in the spec's shape
    (``{"__package": {...}}``) or ``None``.
    """
    if metadata is None:
        return None
    if isinstance(metadata, Mapping):
        sig = metadata.get("__package", metadata.get("package"))
    else:
        sig = getattr(metadata, "package", None)
    if isinstance(sig, Mapping) and sig.get("packageId"):
        return sig
    return None


def is_packed(metadata: Any) -> bool:
    """Whether a definition belongs to a package."""
    return signature_of(metadata) is not None


def belongs_to_package(metadata: Any, package_id: str) -> bool:
    """Whether a definition belongs to the package ``package_id``."""
    sig = signature_of(metadata)
    return sig is not None and sig.get("packageId") == package_id


def is_visible_in_namespace(metadata: Any, namespace: NamespaceContext | str | None,
                            is_entry_point: bool = False) -> bool:
    """Whether code running in ``namespace`` may see a definition.

    ``is_entry_point`` says the definition is an agent its package exposes (an entry agent).
    """
    key = namespace_key(namespace)
    sig = signature_of(metadata)
    if sig is None:
        return key is None
    if key is not None and sig.get("packageId") == key:
        return True
    return is_entry_point
