"""The thread file surface beyond read and write: stat, readdir, find, grep and chunked reads.

A thread's files live in the store keyed by path; directories are implied by the ``/`` in
those paths (``/notes/a.md`` makes ``/notes`` a directory). Paths are compared with one
leading ``/`` whether or not they were written with it, so ``notes/a.md`` and ``/notes/a.md``
are in the same directory. Results keep each file's path as it was written.

These types are plain data with ``to_dict`` giving the wire shape (the spec's camelCase).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DirEntry",
    "FileChunk",
    "FileStats",
    "FindResult",
    "GrepMatch",
    "GrepResult",
    "ReaddirResult",
    "canonical_path",
    "check_regex",
    "compile_glob",
    "glob_prefix",
]


def canonical_path(path: str) -> str:
    """``path`` with exactly one leading ``/`` and no trailing one (``/`` for the root)."""
    stripped = path.strip("/")
    return "/" + stripped if stripped else "/"


@dataclass(slots=True)
class FileStats:
    """What ``stat`` says of a path: a stored file, or a directory implied by files under it."""

    path: str
    is_directory: bool
    size: int = 0
    mime_type: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: int | None = None
    updated_at: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "isDirectory": self.is_directory, "isFile": not self.is_directory,
                "size": self.size, "mimeType": self.mime_type, "metadata": dict(self.metadata),
                "createdAt": self.created_at, "updatedAt": self.updated_at}


@dataclass(slots=True)
class DirEntry:
    """One child of a directory: a file (with its size) or a subdirectory."""

    name: str
    path: str
    is_directory: bool
    size: int = 0
    mime_type: str | None = None
    updated_at: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "isDirectory": self.is_directory,
                "size": self.size, "mimeType": self.mime_type, "updatedAt": self.updated_at}


@dataclass(slots=True)
class ReaddirResult:
    """The immediate children of ``path``, directories first, each group by name."""

    path: str
    entries: list[DirEntry]

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "entries": [e.to_dict() for e in self.entries]}


@dataclass(slots=True)
class FindResult:
    """Files whose canonical path matches a glob, by path; ``truncated`` past the limit."""

    pattern: str
    files: list[FileStats]
    truncated: bool = False

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]

    def to_dict(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "files": [f.to_dict() for f in self.files],
                "paths": self.paths, "truncated": self.truncated}


@dataclass(slots=True)
class GrepMatch:
    """One matching line: the file, its 1-based line number and the line (without its end)."""

    path: str
    line: int
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "text": self.text}


@dataclass(slots=True)
class GrepResult:
    """Matching lines in path then line order; ``truncated`` when ``max_matches`` cut it."""

    pattern: str
    matches: list[GrepMatch]
    files_searched: int = 0
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "matches": [m.to_dict() for m in self.matches],
                "filesSearched": self.files_searched, "truncated": self.truncated}


@dataclass(slots=True)
class FileChunk:
    """``length`` bytes of a file from ``offset``; ``eof`` when it reaches the end."""

    path: str
    offset: int
    data: bytes
    size: int

    @property
    def length(self) -> int:
        return len(self.data)

    @property
    def eof(self) -> bool:
        return self.offset + len(self.data) >= self.size


_GLOB_SPECIALS = re.compile(r"[*?\[]")


def glob_prefix(pattern: str) -> str:
    """The directory part of a glob before its first wildcard (``/docs/`` of ``/docs/**/*.md``),
    used to narrow the rows a store reads before matching."""
    canon = "/" + pattern.lstrip("/")
    hit = _GLOB_SPECIALS.search(canon)
    head = canon if hit is None else canon[: hit.start()]
    return head[: head.rfind("/") + 1]


def compile_glob(pattern: str) -> re.Pattern[str]:
    """A regex for a glob on canonical paths: ``*`` and ``?`` stay within one path segment,
    ``**`` crosses directories (``/**/`` also matches ``/``), ``[...]`` is a character class.
    A pattern without a leading ``/`` is anchored at the root all the same."""
    canon = "/" + pattern.lstrip("/")
    out: list[str] = []
    i, n = 0, len(canon)
    while i < n:
        ch = canon[i]
        if canon.startswith("/**/", i):
            out.append("/(?:.*/)?")
            i += 4
        elif canon.startswith("**", i):
            out.append(".*")
            i += 2
        elif ch == "*":
            out.append("[^/]*")
            i += 1
        elif ch == "?":
            out.append("[^/]")
            i += 1
        elif ch == "[":
            end = canon.find("]", i + 2 if canon.startswith("[!", i) or canon.startswith("[^", i) else i + 1)
            if end == -1:
                out.append(re.escape(ch))
                i += 1
            else:
                body = canon[i + 1:end]
                if body.startswith(("!", "^")):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
        else:
            out.append(re.escape(ch))
            i += 1
    return re.compile("".join(out) + r"\Z")


#: the longest grep pattern accepted
MAX_PATTERN_CHARS = 1000


def check_regex(pattern: str) -> None:
    """Raise ``ValueError`` with a clear message for a pattern ``re`` can't compile."""
    if not pattern:
        raise ValueError("the grep pattern is empty")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"the grep pattern is longer than {MAX_PATTERN_CHARS} characters")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
