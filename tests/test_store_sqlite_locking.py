"""SQLite under a second writer: another process holding the write lock never freezes the
event loop; the store's write waits (asynchronously) and then goes through."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

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
