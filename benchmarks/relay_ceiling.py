"""The PostgreSQL event relay's ceiling: how many events per second one worker can carry to
another over ``LISTEN/NOTIFY``, and how much latency the hop adds.

Two buses in this process, each with its own :class:`~standardagents.relay.PostgresRelay`
(two connections, as two workers have) on a channel of their own. Throughput: ``--events``
events published on bus A as fast as the publisher can, timed until bus B has received
them all (small events like token deltas, and large ones split across notifications).
Latency: events published at ``--rate`` per second, each timed from ``publish`` on A to its
arrival on B (same clock); median, p95 and p99. Both relays share this process's CPU, so the
figures are a floor for two separate workers.

    python benchmarks/relay_ceiling.py --events 20000 --rate 500
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid

from standardagents.events import Event, EventBus
from standardagents.relay import PostgresRelay

__all__ = ["main"]

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


async def _pair(url: str) -> tuple[EventBus, EventBus, PostgresRelay, PostgresRelay]:
    channel = f"sa_bench_{uuid.uuid4().hex[:10]}"
    a, b = EventBus(), EventBus()
    ra = PostgresRelay(a, url, channel=channel, maxsize=1_000_000)
    rb = PostgresRelay(b, url, channel=channel, maxsize=1_000_000)
    await ra.start()
    await rb.start()
    return a, b, ra, rb


async def throughput(url: str, events: int, size: int) -> tuple[float, int]:
    """Events per second from A's publish to B's receipt of the last one; events lost."""
    a, b, ra, rb = await _pair(url)
    try:
        got = 0
        finished = asyncio.Event()

        def count(_event: Event) -> None:
            nonlocal got
            got += 1
            if got >= events:
                finished.set()

        b.add_listener(count)
        text = "x" * size
        start = time.perf_counter()
        for i in range(events):
            a.publish(Event("message_chunk", "thr_bench", {"messageId": "msg_bench", "delta": text, "n": i}))
            if i % 500 == 499:
                await asyncio.sleep(0)  # the publisher yields as an engine does between chunks
        try:
            await asyncio.wait_for(finished.wait(), 120)
        except TimeoutError:
            pass
        elapsed = time.perf_counter() - start
        return got / elapsed, events - got
    finally:
        await ra.aclose()
        await rb.aclose()


async def latency(url: str, events: int, rate: float) -> list[float]:
    """Milliseconds from publish on A to arrival on B, one event every ``1/rate`` seconds."""
    a, b, ra, rb = await _pair(url)
    sent: dict[int, float] = {}
    seen: list[float] = []
    done = asyncio.Event()

    def arrived(event: Event) -> None:
        seen.append((time.perf_counter() - sent[event.data["n"]]) * 1000)
        if len(seen) >= events:
            done.set()

    b.add_listener(arrived)
    try:
        gap = 1.0 / rate
        start = time.perf_counter()
        for i in range(events):
            sent[i] = time.perf_counter()
            a.publish(Event("message_chunk", "thr_bench", {"messageId": "msg_bench", "delta": "tok ", "n": i}))
            await asyncio.sleep(max(0.0, start + (i + 1) * gap - time.perf_counter()))
        try:
            await asyncio.wait_for(done.wait(), 60)
        except TimeoutError:
            pass
        return seen
    finally:
        await ra.aclose()
        await rb.aclose()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def amain(args: argparse.Namespace) -> None:
    url = args.url or os.environ.get("STANDARDAGENTS_TEST_POSTGRES_URL") or DEFAULT_URL
    print(f"PostgreSQL relay between two connections of one process ({url.rsplit('@', 1)[-1]})")
    for size in (16, 400, 12_000):
        rates = []
        lost = 0
        for _ in range(args.repeat):
            per_s, missing = await throughput(url, args.events if size < 10_000 else args.events // 10, size)
            rates.append(per_s)
            lost += missing
        print(f"throughput, {size:>6}-char events: median {statistics.median(rates):>9,.0f} events/s "
              f"(runs: {', '.join(f'{r:,.0f}' for r in rates)}; lost {lost})")
    times = await latency(url, args.latency_events, args.rate)
    if times:
        print(f"added latency at {args.rate:.0f} events/s ({len(times)} events): median {statistics.median(times):.2f} ms, "
              f"p95 {_pct(times, 0.95):.2f} ms, p99 {_pct(times, 0.99):.2f} ms, max {max(times):.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=None, help="PostgreSQL URL (default: the test database)")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rate", type=float, default=500.0, help="events per second for the latency run")
    parser.add_argument("--latency-events", type=int, default=2000)
    asyncio.run(amain(parser.parse_args()))


if __name__ == "__main__":
    main()
