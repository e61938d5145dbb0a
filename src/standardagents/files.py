"""The thread file surface beyond read and write: stat, readdir, find, grep and chunked reads.

A thread's files live in the store keyed by path; directories are implied by the ``/`` in
those paths (``/notes/a.md`` makes ``/notes`` a directory). Every path goes through
:func:`canonical_path` (one leading ``/``, no empty or ``.`` segments) before it is stored or
looked up, so ``notes/a.md`` and ``/notes/a.md`` name the same file; rows stored under another
spelling by older versions are still found (:func:`path_spellings`).

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
    "path_spellings",
]


def canonical_path(path: str) -> str:
    """The one spelling of a thread file's path: a leading ``/``, no trailing one, no empty or
    ``.`` segments (``notes//./a.md`` is ``/notes/a.md``; ``/`` is the root). ``..`` is kept
    as it is (a thread's files are rows, not a file system: nothing to climb out of); the HTTP
    routes refuse it."""
    segments = [part for part in path.split("/") if part not in ("", ".")]
    return "/" + "/".join(segments)


def path_spellings(path: str) -> tuple[str, ...]:
    """The stored paths a lookup of ``path`` matches, the canonical one first: older versions
    stored a path as it was written, with or without its leading ``/``."""
    canon = canonical_path(path)
    return tuple(dict.fromkeys((canon, canon.lstrip("/"), path)))


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
