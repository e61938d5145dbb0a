"""The thread file surface as store operations: stat, readdir, find, grep and chunked reads.

Functions of a synchronous ``Connection`` like :mod:`.ops`, so both backends run the same
statements. None of them loads every file at once: listings read only the metadata columns
(never ``content``), and grep and chunked reads take the content a slice at a time with
``substr`` on the database side, so a large file never comes back whole.

Paths are stored canonical (:func:`~standardagents.files.canonical_path`); a lookup also finds
a row an older version stored under another spelling (:func:`file_row`), a write moves such a
row to the canonical path (:func:`adopt_spelling`), and listings give every file once, under
its canonical path.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, case, delete, func, or_, select, update

from ..files import (
    DirEntry,
    FileChunk,
    FileStats,
    FindResult,
    GrepMatch,
    GrepResult,
    ReaddirResult,
    canonical_path,
    compile_glob,
    glob_prefix,
    path_spellings,
)
from .schema import thread_files

__all__ = [
    "GREP_CHUNK",
    "adopt_spelling",
    "delete_spellings",
    "file_row",
    "find_files",
    "grep_files",
    "one_row_per_file",
    "prefix_clause",
    "read_file_chunk",
    "readdir",
    "stat_path",
]

#: bytes of a file grep reads per query
GREP_CHUNK = 1 << 20
#: a matching line longer than this is cut in the result
MAX_LINE_CHARS = 2000

_META = (thread_files.c.path, thread_files.c.size, thread_files.c.mime_type, thread_files.c.metadata,
         thread_files.c.created_at, thread_files.c.updated_at)


def _under(directory: str) -> ColumnElement[bool] | None:
    """Rows under canonical ``directory``, written with or without their leading ``/``."""
    if directory == "/":
        return None
    inner = directory.lstrip("/") + "/"
    return or_(thread_files.c.path.startswith("/" + inner, autoescape=True),
               thread_files.c.path.startswith(inner, autoescape=True))


def file_row(conn: Connection, thread_id: str, path: str, *columns: Any) -> Any | None:
    """``columns`` of the file at ``path``: its canonical row, else a row stored under another
    spelling of the same path; ``None`` when there is neither."""
    spellings = path_spellings(path)
    stmt = select(*columns).where(thread_files.c.thread_id == thread_id, thread_files.c.path.in_(spellings))
    if len(spellings) > 1:
        stmt = stmt.order_by(case((thread_files.c.path == spellings[0], 0), else_=1))
    return conn.execute(stmt.limit(1)).first()


def adopt_spelling(conn: Connection, thread_id: str, path: str) -> None:
    """Before a write to canonical ``path``: a row stored under another spelling of it becomes
    the canonical row (keeping its creation time), or goes when a canonical row exists, so the
    file is never stored twice."""
    others = [spelling for spelling in path_spellings(path) if spelling != path]
    key = and_(thread_files.c.thread_id == thread_id, thread_files.c.path.in_(others))
    stored = [row[0] for row in conn.execute(select(thread_files.c.path).where(key))]
    if not stored:
        return
    canonical = conn.execute(select(thread_files.c.path).where(thread_files.c.thread_id == thread_id,
                                                              thread_files.c.path == path)).first()
    if canonical is None:
        conn.execute(update(thread_files).where(thread_files.c.thread_id == thread_id,
                                                thread_files.c.path == stored[0]).values(path=path))
        stored = stored[1:]
    if stored:
        conn.execute(delete(thread_files).where(thread_files.c.thread_id == thread_id,
                                                thread_files.c.path.in_(stored)))


def delete_spellings(conn: Connection, thread_id: str, path: str) -> bool:
    """Delete the file at ``path`` under every spelling it is stored with; whether there was one."""
    result = conn.execute(delete(thread_files).where(thread_files.c.thread_id == thread_id,
                                                     thread_files.c.path.in_(path_spellings(path))))
    return result.rowcount > 0


def prefix_clause(prefix: str) -> ColumnElement[bool] | None:
    """Rows whose canonical path starts with the literal ``prefix`` (given with or without its
    leading ``/``), old rows stored without the ``/`` included; ``None``: no condition."""
    if not prefix:
        return None
    bare = prefix.lstrip("/")
    if not bare:
        return None
    return or_(thread_files.c.path.startswith("/" + bare, autoescape=True),
               thread_files.c.path.startswith(bare, autoescape=True))


def one_row_per_file(rows: Iterable[Any], index: int = 0) -> list[Any]:
    """``rows`` with one row per canonical path (the canonical row where an old spelling is
    stored too), ordered by canonical path (by code point, the same on every backend)."""
    chosen: dict[str, Any] = {}
    for row in rows:
        canon = canonical_path(row[index])
        if canon not in chosen or row[index] == canon:
            chosen[canon] = row
    return [chosen[canon] for canon in sorted(chosen)]


def _meta_rows(conn: Connection, thread_id: str, directory: str) -> Iterator[Any]:
    stmt = select(*_META).where(thread_files.c.thread_id == thread_id)
    clause = _under(directory)
    if clause is not None:
        stmt = stmt.where(clause)
    yield from one_row_per_file(conn.execute(stmt))


def _stats(row: Any) -> FileStats:
    return FileStats(path=canonical_path(row[0]), is_directory=False, size=row[1], mime_type=row[2],
                     metadata=dict(row[3] or {}), created_at=row[4], updated_at=row[5])


def stat_path(conn: Connection, thread_id: str, path: str) -> FileStats | None:
    """A file (under any stored spelling of ``path``), or a directory with files under it."""
    canon = canonical_path(path)
    if canon == "/":
        return FileStats(path="/", is_directory=True)
    row = file_row(conn, thread_id, path, *_META)
    if row is not None:
        return _stats(row)
    clause = _under(canon)
    assert clause is not None
    row = conn.execute(select(func.count(), func.min(thread_files.c.created_at),
                              func.max(thread_files.c.updated_at))
                       .where(thread_files.c.thread_id == thread_id).where(clause)).one()
    if not row[0]:
        return None
    return FileStats(path=canon, is_directory=True, created_at=row[1], updated_at=row[2])


def readdir(conn: Connection, thread_id: str, path: str) -> ReaddirResult | None:
    """The immediate children of a directory; ``None`` when no file lies under it (the root
    always exists, empty or not)."""
    directory = canonical_path(path)
    base = "" if directory == "/" else directory
    dirs: dict[str, DirEntry] = {}
    files: list[DirEntry] = []
    for row in _meta_rows(conn, thread_id, directory):
        rest = canonical_path(row[0])[len(base) + 1:]
        name, sep, _ = rest.partition("/")
        if not name:
            continue
        if sep:
            entry = dirs.get(name)
            if entry is None:
                dirs[name] = DirEntry(name=name, path=f"{base}/{name}", is_directory=True, updated_at=row[5])
            elif (entry.updated_at or 0) < row[5]:
                entry.updated_at = row[5]
        else:
            files.append(DirEntry(name=name, path=canonical_path(row[0]), is_directory=False, size=row[1],
                                  mime_type=row[2], updated_at=row[5]))
    if not dirs and not files and directory != "/":
        return None
    ordered = sorted(dirs.values(), key=lambda e: e.name) + sorted(files, key=lambda e: e.name)
    return ReaddirResult(path=directory, entries=ordered)


def _glob_rows(conn: Connection, thread_id: str, pattern: str | None) -> Iterator[Any]:
    if not pattern:
        yield from _meta_rows(conn, thread_id, "/")
        return
    regex = compile_glob(pattern)
    for row in _meta_rows(conn, thread_id, canonical_path(glob_prefix(pattern))):
        if regex.match(canonical_path(row[0])):
            yield row


def find_files(conn: Connection, thread_id: str, pattern: str, limit: int) -> FindResult:
    """Files whose canonical path matches the glob ``pattern``, by path, at most ``limit``."""
    found: list[FileStats] = []
    truncated = False
    for row in _glob_rows(conn, thread_id, pattern):
        if len(found) >= limit:
            truncated = True
            break
        found.append(_stats(row))
    return FindResult(pattern=pattern, files=found, truncated=truncated)


def _slices(conn: Connection, thread_id: str, path: str, size: int) -> Iterator[bytes]:
    key = and_(thread_files.c.thread_id == thread_id, thread_files.c.path == path)
    offset = 0
    while offset < size:
        row = conn.execute(select(func.substr(thread_files.c.content, offset + 1, GREP_CHUNK))
                           .where(key)).first()
        if row is None or not row[0]:
            return
        data = bytes(row[0])
        yield data
        offset += len(data)


def _lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """Lines of a file read slice by slice (a line split across two slices is joined)."""
    carry = b""
    for chunk in chunks:
        parts = (carry + chunk).split(b"\n")
        carry = parts.pop()
        yield from parts
    if carry:
        yield carry


def grep_files(conn: Connection, thread_id: str, pattern: str, ignore_case: bool, glob: str | None,
               max_matches: int) -> GrepResult:
    """Lines matching the regex ``pattern`` in text files (those matching ``glob`` if given),
    with their paths and 1-based line numbers. A file with a NUL byte in its first slice is
    taken for binary and skipped. Files are read one slice at a time."""
    regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    matches: list[GrepMatch] = []
    searched = 0
    # the candidates' metadata first, so content queries don't interleave with an open cursor
    candidates = [(row[0], row[1]) for row in _glob_rows(conn, thread_id, glob)]
    for path, size in candidates:
        searched += 1
        slices = _slices(conn, thread_id, path, size)
        head = next(slices, b"")
        if b"\0" in head:
            continue
        for number, raw in enumerate(_lines(itertools.chain((head,), slices)), start=1):
            text = raw.decode("utf-8", errors="replace").removesuffix("\r")
            if regex.search(text):
                if len(matches) >= max_matches:
                    return GrepResult(pattern=pattern, matches=matches, files_searched=searched,
                                      truncated=True)
                matches.append(GrepMatch(path=canonical_path(path), line=number, text=text[:MAX_LINE_CHARS]))
    return GrepResult(pattern=pattern, matches=matches, files_searched=searched)


def read_file_chunk(conn: Connection, thread_id: str, path: str, offset: int,
                    length: int) -> FileChunk | None:
    """``length`` bytes of a file from ``offset`` (fewer at its end); ``None`` when no file."""
    row = file_row(conn, thread_id, path, thread_files.c.size,
                   func.substr(thread_files.c.content, offset + 1, length))
    if row is None:
        return None
    data = bytes(row[1]) if row[1] is not None and offset < row[0] else b""
    return FileChunk(path=canonical_path(path), offset=offset, data=data, size=row[0])
