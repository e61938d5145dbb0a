"""Packed agents: pack an agent into a Python distribution, discover installed and local
packages, register them lazily under their own namespace, and the spec's visibility helpers."""

from .discover import (
    ENTRY_POINT_GROUP,
    PackageInfo,
    discover_packages,
    load_package_dir,
    load_packages_into,
    load_project_with_packages,
    register_packages,
)
from .namespaces import (
    GlobalNamespaceContext,
    NamespaceContext,
    PackedNamespaceContext,
    belongs_to_package,
    global_namespace,
    is_packed,
    is_visible_in_namespace,
    namespace_context,
    namespace_key,
    packed_namespace,
)
from .pack import build_wheel, pack_project
from .signature import PackageSignature, ReadOnlySignature, make_signature
from .unpack import unpack
from .validate import validate_packed

__all__ = [
    "ENTRY_POINT_GROUP",
    "GlobalNamespaceContext",
    "NamespaceContext",
    "PackageInfo",
    "PackageSignature",
    "PackedNamespaceContext",
    "ReadOnlySignature",
    "belongs_to_package",
    "build_wheel",
    "discover_packages",
    "global_namespace",
    "is_packed",
    "is_visible_in_namespace",
    "load_package_dir",
    "load_packages_into",
    "load_project_with_packages",
    "make_signature",
    "namespace_context",
    "namespace_key",
    "pack_project",
    "packed_namespace",
    "register_packages",
    "unpack",
    "validate_packed",
]
