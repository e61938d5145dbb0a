"""Webhook delivery throughput: events written to the outbox, then delivered by one worker's
sender (claim, sign with standardwebhooks, POST, record the attempt) to a local receiver that
answers 200 at once.

Prints, per store (a SQLite file, and PostgreSQL when reachable), the median over
``--rounds`` of events delivered per second and of the milliseconds one event costs the
sender, and what writing an event to the outbox costs (µs per event, two subscriptions).

    python benchmarks/webhooks.py --events 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import socket
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import uvicorn

from standardagents.engine.runtime import Runtime
from standardagents.project import build_registry
from standardagents.service.webhooks import WebhookSender, create_webhook, enqueue
from standardagents.store import SQLStore, serviceops

__all__ = ["main"]

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"


async def _ok(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The receiver: 200 at once to every request."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


def _serve(port: int) -> None:
    uvicorn.run(_ok, host="127.0.0.1", port=port, log_level="warning", lifespan="off")


class Receiver:
    """The receiver in a process of its own, so it does not share the sender's interpreter."""

    def __init__(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.process = multiprocessing.get_context("spawn").Process(target=_serve, args=(self.port,), daemon=True)

    def __enter__(self) -> Receiver:
        self.process.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.05)
        raise RuntimeError("the receiver did not start")

    def __exit__(self, *_: object) -> None:
        self.process.terminate()
        self.process.join(10)


async def one_round(url: str, events: int, receiver: Receiver, schema: str | None) -> tuple[float, float, float]:
    store = SQLStore(url, schema=schema) if schema else SQLStore(url)
    rt = Runtime(build_registry(), store)
    await store.open()
    try:
        await create_webhook(rt, f"http://127.0.0.1:{receiver.port}/a", ["execution.done"])
        await create_webhook(rt, f"http://127.0.0.1:{receiver.port}/b", ["execution.done"])
        started = time.perf_counter()
        for i in range(events // 2):
            await enqueue(rt, "execution.done", f"exe_{i}", {"executionId": f"exe_{i}", "outcome": "response"}, None)
        write_us = (time.perf_counter() - started) / events * 1e6
        sender = WebhookSender(rt, batch=64)
        sender.start()
        started = time.perf_counter()
        counts = await serviceops.run_op(store, serviceops.outbox_counts, write=False)
        while counts.get("pending"):  # the sender's progress, read from the store
            await asyncio.sleep(0.01)
            counts = await serviceops.run_op(store, serviceops.outbox_counts, write=False)
        elapsed = time.perf_counter() - started
        await sender.stop()
        delivered = counts.get("delivered", 0)
        return delivered / elapsed, elapsed / delivered * 1000, write_us
    finally:
        await rt.aclose()


async def run(url: str, label: str, events: int, rounds: int, receiver: Receiver, pg: bool) -> None:
    rates, costs, writes = [], [], []
    for _ in range(rounds):
        if pg:
            schema = f"bench_{uuid.uuid4().hex[:8]}"
            rate, cost, write = await one_round(url, events, receiver, schema)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                rate, cost, write = await one_round(f"sqlite:///{Path(tmp) / 'hooks.db'}", events, receiver, None)
        rates.append(rate)
        costs.append(cost)
        writes.append(write)
    print(f"{label:<10} delivered {statistics.median(rates):8.0f} events/s   "
          f"{statistics.median(costs):6.2f} ms per event   outbox write {statistics.median(writes):7.0f} µs per event")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--postgres", default=os.environ.get("STANDARDAGENTS_BENCH_PG", DEFAULT_PG))
    args = parser.parse_args()
    os.environ["STANDARDAGENTS_WEBHOOKS_ALLOW_PRIVATE"] = "1"
    print(f"{args.events} events (two subscriptions, {args.events // 2} each), median of {args.rounds} rounds")
    with Receiver() as receiver:
        asyncio.run(run("sqlite", "SQLite", args.events, args.rounds, receiver, False))
        try:
            asyncio.run(run(args.postgres, "PostgreSQL", args.events, args.rounds, receiver, True))
        except Exception as exc:  # no PostgreSQL here: the SQLite figures stand alone
            print(f"PostgreSQL skipped: {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main()
