"""What the event log costs: on the publisher's path (the engine's), and off it.

Publishing: ``--events`` token-delta events spread over ``--threads`` threads are published
on a bus with one subscriber, with and without an :class:`~standardagents.eventlog.EventLog`
attached (interleaved rounds; µs per event, medians). Writing: the same events flushed to
the store (one row per thread per batch), on a SQLite file and, when reachable, PostgreSQL
(µs per event and per flush). The writes run on a background task, never inside ``publish``.

    python benchmarks/event_log.py --events 20000 --threads 200 --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from standardagents.eventlog import EventLog
from standardagents.events import Event, EventBus
from standardagents.store import SQLStore

__all__ = ["main"]

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"


def _events(n: int, threads: int) -> list[Event]:
    return [Event("message_chunk", f"thr_{i % threads}", {"messageId": f"msg_{i % threads}", "delta": "tok ", "side": "a"})
            for i in range(n)]


def publish_us(n: int, threads: int, store: SQLStore | None) -> float:
    """µs per published event (the log's writer is not running: only the publisher's path)."""
    bus = EventBus(maxsize=n + 1)
    sub = bus.subscribe(None)
    if store is not None:
        log = EventLog(bus, store)
        bus.add_listener(log._on_event)
    events = _events(n, threads)
    start = time.perf_counter()
    for event in events:
        bus.publish(event)
    elapsed = time.perf_counter() - start
    sub.close()
    return elapsed / n * 1e6


async def flush_us(n: int, threads: int, store: SQLStore) -> tuple[float, float]:
    """µs per event and ms per flush when ``n`` events (in batches of 50 ms worth) are written."""
    bus = EventBus()
    log = EventLog(bus, store, prune_interval=3600)
    bus.add_listener(log._on_event)
    events = _events(n, threads)
    flushes = 10
    per = n // flushes
    elapsed = 0.0
    for k in range(flushes):
        for event in events[k * per:(k + 1) * per]:
            bus.publish(event)
        start = time.perf_counter()
        await log.flush()
        elapsed += time.perf_counter() - start
    return elapsed / n * 1e6, elapsed / flushes * 1000


async def amain(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = SQLStore(f"sqlite:///{Path(tmp) / 'log.db'}")
        await sqlite.open()
        off, on = [], []
        for _ in range(args.rounds):
            off.append(publish_us(args.events, args.threads, None))
            on.append(publish_us(args.events, args.threads, sqlite))
        print(f"publish, {args.events} events over {args.threads} threads, one subscriber (medians of {args.rounds}):")
        print(f"  without the log {statistics.median(off):.2f} µs/event, with it {statistics.median(on):.2f} µs/event "
              f"(+{statistics.median(on) - statistics.median(off):.2f} µs, x{statistics.median(on) / statistics.median(off):.2f})")
        stores: list[tuple[str, SQLStore]] = [("SQLite file", sqlite)]
        pg_url = args.pg or os.environ.get("STANDARDAGENTS_TEST_POSTGRES_URL") or DEFAULT_PG
        pg = SQLStore(pg_url, schema=f"bench_{uuid.uuid4().hex[:8]}")
        try:
            await pg.open()
            stores.append(("PostgreSQL", pg))
        except Exception as exc:
            print(f"  (PostgreSQL skipped: {exc})")
        for name, store in stores:
            runs = [await flush_us(args.events, args.threads, store) for _ in range(args.rounds)]
            print(f"write to {name}: {statistics.median(r[0] for r in runs):.2f} µs/event, "
                  f"{statistics.median(r[1] for r in runs):.1f} ms per flush of {args.events // 10} events "
                  f"({args.threads} rows), off the publisher's path")
        if len(stores) > 1:
            from sqlalchemy import text

            engine = pg._aengine
            if engine is not None:
                async with engine.begin() as conn:
                    await conn.execute(text(f'DROP SCHEMA IF EXISTS "{pg.schema}" CASCADE'))
            await pg.close()
        await sqlite.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pg", default=None, help="PostgreSQL URL (default: the test database)")
    asyncio.run(amain(parser.parse_args()))


if __name__ == "__main__":
    main()
