"""SQLite under a second writer: another process holding the write lock never freezes the
event loop; the store's write waits (asynchronously) and then goes through."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from standardagents.records import ThreadRecord
from standardagents.store import SQLStore

HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE env_values SET value = value")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
print("released", flush=True)
"""


async def test_a_write_waits_for_another_process_without_holding_the_event_loop(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    store = SQLStore(f"sqlite:///{path}")
    await store.open()
    try:
        thread = await store.create_thread(ThreadRecord(agent="helper"))
        # another process (a CLI command, a second server) takes the write lock and keeps it
        holder = await asyncio.create_subprocess_exec(
            sys.executable, "-c", HOLDER, str(path),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        assert holder.stdin is not None and holder.stdout is not None
        assert (await holder.stdout.readline()).strip() == b"locked"
        write = asyncio.get_running_loop().create_task(store.set_env("thread", thread.id, "note", "kept"))
        for _ in range(5):  # the write starts, meets the lock and waits
            await asyncio.sleep(0)
        assert not write.done()
        # the loop is free meanwhile: reads answer, and this coroutine lets the holder go
        assert (await store.get_thread(thread.id)) is not None
        holder.stdin.write(b"go\n")
        await holder.stdin.drain()
        assert (await holder.stdout.readline()).strip() == b"released"
        await write
        assert await store.get_env("thread", thread.id, "note") == "kept"
        assert await holder.wait() == 0
    finally:
        await store.close()


def _size(path: Path) -> int:
    return path.stat().st_size


@pytest.mark.parametrize("yields", [True, False], ids=["server", "tight-loop"])
async def test_the_wal_stays_bounded_under_a_steady_stream_of_commits(tmp_path: Path, monkeypatch, yields: bool) -> None:
    from standardagents.store import sql

    monkeypatch.setattr(sql, "CHECKPOINT_COMMITS", 50)
    path = tmp_path / "busy.db"
    wal = Path(f"{path}-wal")
    store = SQLStore(f"sqlite:///{path}")
    await store.open()
    try:
        thread = await store.create_thread(ThreadRecord(agent="helper"))
        largest = 0
        for i in range(2000):  # commits back to back, as a busy server (or a script) makes them
            await store.set_env("thread", thread.id, f"k{i}", "x" * 200)
            if yields:
                await asyncio.sleep(0)
            largest = max(largest, _size(wal))
        # each commit adds two 4 KB pages: 2,000 of them make a WAL of 18 MB when it is never
        # started over; checkpoints every 50 commits (at worst every 200) keep it under 3 MB
        assert largest < 3 * 1024 * 1024, largest
        assert await store.get_env("thread", thread.id, "k1999") == "x" * 200
    finally:
        await store.close()
    reopened = SQLStore(f"sqlite:///{path}")
    await reopened.open()
    try:
        assert len(await reopened.list_env("thread", thread.id)) == 2000
    finally:
        await reopened.close()
