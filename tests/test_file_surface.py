"""The thread file surface: stat, readdir, find, grep and chunked reads, on SQLite and
PostgreSQL (the ``store`` fixture), through ``ThreadState`` and over the REST API."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from standardagents import Runtime
from standardagents.files import canonical_path, compile_glob, glob_prefix
from standardagents.project import build_registry
from standardagents.records import ThreadRecord
from standardagents.store import SQLStore
from standardagents.store.fileops import GREP_CHUNK
from store_fixtures import Backend

API = "/api"

_TREE = {
    "/notes/a.md": b"# Alpha\nthe tide comes in\nnothing here\n",
    "/notes/deep/b.md": b"low TIDE\nhigh tide at noon",
    "/notes/c.txt": b"plain text, no match",
    "/src/main.py": b"import sys\nprint('tide')\n",
    "/top.txt": b"top level",
    "/blob.bin": b"tide\0\x01\x02 binary",
}


async def _tree(store: SQLStore) -> str:
    thread = await store.create_thread(ThreadRecord(agent="helper"))
    for path, data in _TREE.items():
        await store.write_file(thread.id, path, data, mime_type="text/plain")
    return thread.id


async def test_stat_file_directory_and_missing(store: SQLStore) -> None:
    tid = await _tree(store)
    file = await store.stat_path(tid, "/notes/a.md")
    folder = await store.stat_path(tid, "notes/")
    root = await store.stat_path(tid, "/")
    assert file is not None and (file.is_directory, file.size, file.mime_type) == (False, 39, "text/plain")
    assert folder is not None and (folder.path, folder.is_directory) == ("/notes", True)
    assert root is not None and root.is_directory
    assert await store.stat_path(tid, "/nope") is None
    assert await store.stat_path(tid, "/note") is None  # a prefix of a directory is not one


async def test_readdir_lists_immediate_children(store: SQLStore) -> None:
    tid = await _tree(store)
    root = await store.readdir(tid, "/")
    notes = await store.readdir(tid, "/notes")
    assert root is not None and [(e.name, e.is_directory) for e in root.entries] == [
        ("notes", True), ("src", True), ("blob.bin", False), ("top.txt", False)]
    assert notes is not None and [(e.name, e.path, e.is_directory, e.size) for e in notes.entries] == [
        ("deep", "/notes/deep", True, 0), ("a.md", "/notes/a.md", False, 39), ("c.txt", "/notes/c.txt", False, 20)]
    assert await store.readdir(tid, "/missing") is None
    assert await store.readdir(tid, "/top.txt") is None


async def test_readdir_joins_paths_written_with_and_without_leading_slash(store: SQLStore) -> None:
    thread = await store.create_thread(ThreadRecord(agent="helper"))
    await store.write_file(thread.id, "docs/x.md", b"x")
    await store.write_file(thread.id, "/docs/y.md", b"y")
    listing = await store.readdir(thread.id, "docs")
    assert listing is not None and [(e.name, e.path) for e in listing.entries] == [
        ("x.md", "/docs/x.md"), ("y.md", "/docs/y.md")]


# one spelling of a path ---------------------------------------------------------------------
async def _old_row(backend: Backend, thread_id: str, path: str, data: bytes, created_at: int = 1) -> None:
    """A row as an older version stored it: the path exactly as the writer spelt it."""
    p = [backend.param(n) for n in range(1, 8)]
    await backend.fetch("INSERT INTO thread_files (thread_id, path, content, size, mime_type, created_at, "
                        f"updated_at) VALUES ({', '.join(p)})",
                        thread_id, path, data, len(data), "text/plain", created_at, created_at)


def test_canonical_path_has_one_leading_slash_and_no_empty_or_dot_segments() -> None:
    assert [canonical_path(p) for p in ("notes.txt", "/notes.txt", "notes//./a.md/", "", "/", "a/../b")] == [
        "/notes.txt", "/notes.txt", "/notes/a.md", "/", "/", "/a/../b"]


async def test_a_file_written_without_leading_slash_is_read_with_it(store: SQLStore) -> None:
    thread = await store.create_thread(ThreadRecord(agent="helper"))
    await store.write_file(thread.id, "notes.txt", b"jotted")
    assert await store.read_file(thread.id, "/notes.txt") == b"jotted"


async def test_a_file_written_with_leading_slash_is_read_without_it(store: SQLStore) -> None:
    thread = await store.create_thread(ThreadRecord(agent="helper"))
    await store.write_file(thread.id, "/notes.txt", b"jotted")
    assert await store.read_file(thread.id, "notes.txt") == b"jotted"


async def test_a_path_is_stored_and_listed_canonical(store: SQLStore) -> None:
    thread = await store.create_thread(ThreadRecord(agent="helper"))
    record = await store.write_file(thread.id, "notes//./a.md", b"x")
    assert record.path == "/notes/a.md"
    assert [f.path for f in await store.list_files(thread.id, "notes/")] == ["/notes/a.md"]


async def test_both_spellings_write_one_file(store: SQLStore) -> None:
    thread = await store.create_thread(ThreadRecord(agent="helper"))
    await store.write_file(thread.id, "a.txt", b"one")
    await store.write_file(thread.id, "/a.txt", b"two")
    assert [(f.path, f.size) for f in await store.list_files(thread.id)] == [("/a.txt", 3)]
    assert await store.read_file(thread.id, "a.txt") == b"two"


async def test_an_old_row_without_leading_slash_stays_readable(store: SQLStore, backend: Backend) -> None:
    thread = await store.create_thread(ThreadRecord(agent="helper"))
    await _old_row(backend, thread.id, "notes.txt", b"old words")
    stat = await store.stat_file(thread.id, "/notes.txt")
    chunk = await store.read_file_chunk(thread.id, "/notes.txt", 4, 5)
    assert await store.read_file(thread.id, "/notes.txt") == await store.read_file(thread.id, "notes.txt") == b"old words"
    assert stat is not None and stat.path == "/notes.txt"
    assert chunk is not None and chunk.data == b"words"
    assert [f.path for f in await store.list_files(thread.id)] == ["/notes.txt"]


async def test_an_old_row_with_leading_slash_stays_readable(store: SQLStore, backend: Backend) -> None:
    thread = await store.create_thread(ThreadRecord(agent="helper"))
    await _old_row(backend, thread.id, "/notes.txt", b"old words")
    assert await store.read_file(thread.id, "notes.txt") == b"old words"


async def test_writing_over_an_old_row_moves_it_to_the_canonical_path(store: SQLStore, backend: Backend) -> None:
    thread = await store.create_thread(ThreadRecord(agent="helper"))
    await _old_row(backend, thread.id, "notes.txt", b"old", created_at=7)
    await store.write_file(thread.id, "notes.txt", b"new")
    rows = await backend.fetch(f"SELECT path, content, created_at FROM thread_files WHERE thread_id = {backend.param(1)}",
                               thread.id)
    assert [(path, bytes(content), created) for path, content, created in rows] == [("/notes.txt", b"new", 7)]


async def test_old_rows_under_both_spellings_are_one_file(store: SQLStore, backend: Backend) -> None:
    thread = await store.create_thread(ThreadRecord(agent="helper"))
    await _old_row(backend, thread.id, "a.txt", b"bare")
    await _old_row(backend, thread.id, "/a.txt", b"slashed")
    listed = await store.list_files(thread.id)
    found = await store.find_files(thread.id, "*.txt")
    assert [f.path for f in listed] == found.paths == ["/a.txt"]
    assert await store.read_file(thread.id, "a.txt") == b"slashed"
    assert await store.delete_file(thread.id, "a.txt")
    assert await store.list_files(thread.id) == []


async def test_find_by_glob(store: SQLStore) -> None:
    tid = await _tree(store)
    assert (await store.find_files(tid, "**/*.md")).paths == ["/notes/a.md", "/notes/deep/b.md"]
    assert (await store.find_files(tid, "/notes/*.md")).paths == ["/notes/a.md"]
    assert (await store.find_files(tid, "/notes/*.[mt][dx]*")).paths == ["/notes/a.md", "/notes/c.txt"]
    assert (await store.find_files(tid, "*.txt")).paths == ["/top.txt"]
    assert (await store.find_files(tid, "/notes/**")).paths == ["/notes/a.md", "/notes/c.txt", "/notes/deep/b.md"]
    limited = await store.find_files(tid, "**", limit=2)
    assert (len(limited.files), limited.truncated) == (2, True)


async def test_find_treats_sql_wildcards_literally(store: SQLStore) -> None:
    thread = await store.create_thread(ThreadRecord(agent="helper"))
    for path in ("/a_b/x.md", "/aXb/y.md", "/a%b/z.md"):
        await store.write_file(thread.id, path, b"x")
    assert (await store.find_files(thread.id, "/a_b/*")).paths == ["/a_b/x.md"]
    assert (await store.find_files(thread.id, "/a%b/*")).paths == ["/a%b/z.md"]


async def test_grep_gives_paths_and_line_numbers(store: SQLStore) -> None:
    tid = await _tree(store)
    result = await store.grep_files(tid, r"tide")
    assert [(m.path, m.line, m.text) for m in result.matches] == [
        ("/notes/a.md", 2, "the tide comes in"),
        ("/notes/deep/b.md", 2, "high tide at noon"),
        ("/src/main.py", 2, "print('tide')"),
    ]
    assert result.files_searched == 6 and not result.truncated


async def test_grep_ignore_case_glob_and_limit(store: SQLStore) -> None:
    tid = await _tree(store)
    folded = await store.grep_files(tid, r"^\w+ tide", ignore_case=True, glob="**/*.md")
    assert [(m.path, m.line) for m in folded.matches] == [("/notes/a.md", 2), ("/notes/deep/b.md", 1),
                                                          ("/notes/deep/b.md", 2)]
    cut = await store.grep_files(tid, "tide", ignore_case=True, max_matches=1)
    assert (len(cut.matches), cut.truncated) == (1, True)


async def test_grep_joins_a_line_split_across_read_slices(store: SQLStore) -> None:
    thread = await store.create_thread(ThreadRecord(agent="helper"))
    head = b"x" * (GREP_CHUNK - 3) + b"\n"
    data = head + b"ab" + b"NEEDLE" + b"cd\nlast line\n"
    await store.write_file(thread.id, "/big.log", data)
    result = await store.grep_files(thread.id, "NEEDLE")
    assert [(m.line, m.text) for m in result.matches] == [(2, "abNEEDLEcd")]


async def test_read_file_chunk_slices_on_the_database(store: SQLStore) -> None:
    thread = await store.create_thread(ThreadRecord(agent="helper"))
    data = bytes(range(256)) * 40
    await store.write_file(thread.id, "/data.bin", data)
    first = await store.read_file_chunk(thread.id, "/data.bin", 0, 1000)
    middle = await store.read_file_chunk(thread.id, "/data.bin", 5000, 1000)
    tail = await store.read_file_chunk(thread.id, "/data.bin", 10_000, 1000)
    beyond = await store.read_file_chunk(thread.id, "/data.bin", 20_000, 10)
    assert first is not None and (first.data, first.size, first.eof) == (data[:1000], 10_240, False)
    assert middle is not None and middle.data == data[5000:6000]
    assert tail is not None and (tail.data, tail.eof) == (data[10_000:], True)
    assert beyond is not None and (beyond.data, beyond.eof) == (b"", True)
    assert await store.read_file_chunk(thread.id, "/none", 0, 10) is None


async def test_thread_state_file_surface(store: SQLStore) -> None:
    rt = await Runtime.open(build_registry(), store=store)
    try:
        tid = await _tree(store)
        state = await rt.state(tid)
        stats = await state.stat("/src/main.py")
        listing = await state.readdir("/src")
        found = await state.find("**/*.py")
        hits = await state.grep("import", glob="/src/**")
        chunks = [c.data async for c in state.read_file_stream("/notes/a.md", chunk_size=10)]
        window = [c.data async for c in state.read_file_stream("/notes/a.md", chunk_size=4, offset=2, length=7)]
        assert stats is not None and stats.size == len(_TREE["/src/main.py"])
        assert [e.name for e in listing.entries] == ["main.py"]
        assert found.paths == ["/src/main.py"]
        assert [(m.path, m.line) for m in hits.matches] == [("/src/main.py", 1)]
        assert b"".join(chunks) == _TREE["/notes/a.md"] and max(len(c) for c in chunks) == 10
        assert b"".join(window) == _TREE["/notes/a.md"][2:9]
        with pytest.raises(FileNotFoundError):
            await state.readdir("/nowhere")
        with pytest.raises(ValueError, match="invalid regular expression"):
            await state.grep("([unclosed")
        with pytest.raises(FileNotFoundError):
            [c async for c in state.read_file_stream("/nowhere.txt")]
    finally:
        await rt.aclose()


def test_glob_compilation() -> None:
    assert glob_prefix("/docs/**/*.md") == "/docs/"
    assert glob_prefix("*.md") == "/"
    assert compile_glob("**/*.md").match("/a.md") and compile_glob("**/*.md").match("/x/y/a.md")
    assert not compile_glob("/*.md").match("/x/a.md")
    assert compile_glob("/f[!a]o").match("/fbo") and not compile_glob("/f[!a]o").match("/fao")
    assert compile_glob("/a?c").match("/abc") and not compile_glob("/a?c").match("/a/c")


# REST ------------------------------------------------------------------------------------------
async def _rest_tree(client: httpx.AsyncClient, headers: dict[str, str]) -> str:
    r = await client.post(f"{API}/threads", json={"agent": "helper"}, headers=headers)
    tid = str(r.json()["id"])
    for path, data in _TREE.items():
        put = await client.put(f"{API}/threads/{tid}/files{path}", content=data, headers=headers)
        assert put.status_code == 201
    return tid


async def test_rest_file_surface(client: httpx.AsyncClient, actors: Any) -> None:
    auth = actors.auth("alice")
    tid = await _rest_tree(client, auth)
    base = f"{API}/threads/{tid}/files"
    listing = (await client.get(base, params={"dir": "/notes"}, headers=auth)).json()
    found = (await client.get(base, params={"glob": "**/*.md"}, headers=auth)).json()
    grep = (await client.get(base, params={"grep": "TIDE", "ignoreCase": "true", "glob": "/notes/**"},
                             headers=auth)).json()
    stat = (await client.get(f"{base}/notes", params={"stat": "true"}, headers=auth)).json()
    chunk = await client.get(f"{base}/notes/a.md", params={"offset": 2, "length": 5}, headers=auth)
    assert [e["name"] for e in listing["entries"]] == ["deep", "a.md", "c.txt"]
    assert found["paths"] == ["/notes/a.md", "/notes/deep/b.md"]
    assert [(m["path"], m["line"]) for m in grep["matches"]] == [("/notes/a.md", 2), ("/notes/deep/b.md", 1),
                                                                 ("/notes/deep/b.md", 2)]
    assert (stat["isDirectory"], stat["path"]) == (True, "/notes")
    assert chunk.content == _TREE["/notes/a.md"][2:7]
    assert chunk.headers["x-file-size"] == str(len(_TREE["/notes/a.md"]))


@pytest.mark.parametrize(("suffix", "params", "status"), [
    ("", {"grep": "(["}, 422),
    ("", {"grep": ""}, 422),
    ("", {"dir": "/missing"}, 404),
    ("", {"glob": "*", "limit": "0"}, 422),
    ("/notes/a.md", {"offset": "-1"}, 422),
    ("/notes/a.md", {"offset": "0", "length": "0"}, 422),
    ("/nope.txt", {"offset": "0"}, 404),
    ("/nope", {"stat": "true"}, 404),
])
async def test_rest_file_surface_bad_input(client: httpx.AsyncClient, actors: Any, suffix: str,
                                           params: dict[str, str], status: int) -> None:
    auth = actors.auth("alice")
    tid = await _rest_tree(client, auth)
    r = await client.get(f"{API}/threads/{tid}/files{suffix}", params=params, headers=auth)
    assert r.status_code == status
    assert r.json()["error"]["message"]


async def test_rest_reads_a_file_a_tool_wrote_without_leading_slash(client: httpx.AsyncClient, actors: Any,
                                                                   runtime: Runtime) -> None:
    auth = actors.auth("alice")
    tid = (await client.post(f"{API}/threads", json={"agent": "helper"}, headers=auth)).json()["id"]
    await (await runtime.state(tid)).write_file("notes.txt", "from a tool", mime_type="text/plain")
    read = await client.get(f"{API}/threads/{tid}/files/notes.txt", headers=auth)
    assert (read.status_code, read.content) == (200, b"from a tool")


async def test_rest_file_search_of_another_user_is_403(client: httpx.AsyncClient, actors: Any) -> None:
    tid = await _rest_tree(client, actors.auth("alice"))
    r = await client.get(f"{API}/threads/{tid}/files", params={"grep": "tide"}, headers=actors.auth("bob"))
    assert r.status_code == 403
