"""Package signatures: the mark a packed definition carries to say which package it is from.

Signatures are attached when a package is loaded, never written into its source, so the same
packed files stay portable between runtimes. They are read-only once made, like definitions.
"""

from __future__ import annotations

import time
from typing import Any, Literal, NoReturn, TypedDict

__all__ = ["PackageSignature", "PackageSource", "ReadOnlySignature", "make_signature"]

PackageSource = Literal["installed", "local"]


class PackageSignature(TypedDict):
    """Which package a definition belongs to (the spec's ``PackageSignature``)."""

    packageId: str
    version: str
    source: PackageSource
    packedAt: int


class ReadOnlySignature(dict[str, Any]):
    """A signature dict that refuses changes; still a plain dict for JSON and comparisons."""

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("a package signature is read-only (it is attached when the package loads)")

    __setitem__ = _refuse
    __delitem__ = _refuse
    clear = _refuse
    pop = _refuse
    popitem = _refuse
    setdefault = _refuse
    update = _refuse
    __ior__ = _refuse

    def __copy__(self) -> ReadOnlySignature:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> ReadOnlySignature:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (ReadOnlySignature, (dict(self),))


def make_signature(package_id: str, version: str, source: PackageSource, packed_at: int | None = None) -> ReadOnlySignature:
    """A read-only ``PackageSignature`` for one loaded package."""
    if source not in ("installed", "local"):
        raise ValueError(f"signature source must be 'installed' or 'local', not {source!r}")
    return ReadOnlySignature(packageId=package_id, version=version, source=source,
                             packedAt=int(packed_at if packed_at is not None else time.time() * 1000))
