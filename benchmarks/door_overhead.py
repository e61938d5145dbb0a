"""What the OpenAI door costs over the REST API for the same agent and turn.

The OpenAI wire stub (one process) is the agent's model, answering at once; the server runs
in another process with uvicorn on 127.0.0.1. This process sends one turn at a time, in
interleaved rounds of ``--batch`` turns per way of asking:

- ``rest``: ``POST /api/threads/{id}/messages?stream=true`` on a fresh thread (the baseline);
- ``chat``: ``POST /v1/chat/completions`` streamed, naming a fresh thread (``X-Thread-Id``);
- ``chat-new``: the same without a thread (the door creates one, the usual client's way);
- ``responses``: ``POST /v1/responses`` streamed (a new thread, the response stored).

It prints, per way, the median time to the first text token after the request is sent (over
every turn) and the server's CPU time per turn (median over the rounds of the batch's CPU
delta from ``/proc/<pid>/stat``, so Linux only), each also as a ratio to ``rest``. Fresh
threads for ``rest`` and ``chat`` are made before each batch, outside what is measured.

    python benchmarks/door_overhead.py --rounds 10 --batch 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_procs import free_port, make_token, wait_ready
from server_load import _start_server, _start_stub, _write_project

__all__ = ["main"]

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_ASK = "Add 1 and 2."


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


async def _first_token(client: httpx.AsyncClient, method: str, url: str, body: dict[str, object],
                       is_token: Callable[[dict[str, object]], bool], headers: dict[str, str] | None = None) -> float:
    """Seconds from sending the request to its first text token; the stream is read to its end."""
    start = time.perf_counter()
    first: float | None = None
    async with client.stream(method, url, json=body, headers=headers) as response:
        response.raise_for_status()
        buffer = ""
        async for text in response.aiter_text():
            buffer += text
            while "\n\n" in buffer:
                frame, buffer = buffer.split("\n\n", 1)
                data = next((line[6:] for line in frame.splitlines() if line.startswith("data: ")), None)
                if data is None or data == "[DONE]":
                    continue
                if first is None and is_token(json.loads(data)):
                    first = time.perf_counter() - start
    if first is None:
        raise SystemExit(f"{url}: the turn streamed no text")
    return first


def _rest_token(event: dict[str, object]) -> bool:
    return event.get("type") == "message_chunk"


def _chat_token(chunk: dict[str, object]) -> bool:
    choices = chunk.get("choices") or []
    return bool(choices) and bool(choices[0].get("delta", {}).get("content"))  # type: ignore[index, union-attr]


def _responses_token(event: dict[str, object]) -> bool:
    return event.get("type") == "response.output_text.delta"


async def _fresh_threads(client: httpx.AsyncClient, n: int) -> list[str]:
    out = []
    for _ in range(n):
        r = await client.post("/api/threads", json={"agent": "bench"})
        r.raise_for_status()
        out.append(r.json()["id"])
    return out


async def _measure(base: str, token: str, pid: int, rounds: int, batch: int) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    await wait_ready(base, headers)
    ttft: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:
        def rest(thread: str) -> Awaitable[float]:
            return _first_token(client, "POST", f"/api/threads/{thread}/messages?stream=true",
                                {"content": _ASK}, _rest_token)

        def chat(thread: str) -> Awaitable[float]:
            return _first_token(client, "POST", "/v1/chat/completions",
                                {"model": "bench", "stream": True, "messages": [{"role": "user", "content": _ASK}]},
                                _chat_token, {"X-Thread-Id": thread})

        def chat_new(_thread: str) -> Awaitable[float]:
            return _first_token(client, "POST", "/v1/chat/completions",
                                {"model": "bench", "stream": True, "messages": [{"role": "user", "content": _ASK}]},
                                _chat_token)

        def responses(_thread: str) -> Awaitable[float]:
            return _first_token(client, "POST", "/v1/responses", {"model": "bench", "stream": True, "input": _ASK},
                                _responses_token)

        ways: dict[str, tuple[Callable[[str], Awaitable[float]], bool]] = {
            "rest": (rest, True), "chat": (chat, True), "chat-new": (chat_new, False), "responses": (responses, False)}
        for run, _threads in ways.values():  # warm-up: imports, connections, first-use caches
            await run((await _fresh_threads(client, 1))[0])
        for _round in range(rounds):
            for way, (run, needs_threads) in ways.items():
                threads = await _fresh_threads(client, batch) if needs_threads else [""] * batch
                before = _cpu_seconds(pid)
                for thread in threads:
                    ttft.setdefault(way, []).append(await run(thread))
                cpu.setdefault(way, []).append((_cpu_seconds(pid) - before) / batch)
    base_ttft = statistics.median(ttft["rest"])
    base_cpu = statistics.median(cpu["rest"])
    print(f"{rounds} rounds x {batch} turns per way, interleaved; the model answers at once")
    print(f"{'way':<10} {'first token (median)':>22} {'ratio':>7} {'server CPU per turn (median)':>30} {'ratio':>7}")
    for way in ways:
        t, c = statistics.median(ttft[way]), statistics.median(cpu[way])
        print(f"{way:<10} {t * 1000:>19.2f} ms {t / base_ttft:>7.2f} {c * 1000:>27.2f} ms "
              f"{(c / base_cpu if base_cpu else float('nan')):>7.2f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--max-seconds", type=float, default=600.0)
    args = parser.parse_args(argv)
    if not Path("/proc/self/stat").exists():
        raise SystemExit("this benchmark reads the server's CPU time from /proc (Linux)")
    stub, stub_url = _start_stub(0.0, 0, args.max_seconds)
    server = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "project"
            _write_project(root, stub_url, 0)
            database_url = f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
            token = asyncio.run(make_token(database_url, root))
            port = free_port()
            server = _start_server(root, database_url, port)
            asyncio.run(_measure(f"http://127.0.0.1:{port}", token, server.pid, args.rounds, args.batch))
    finally:
        for proc in (server, stub):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(10)
                except Exception:
                    proc.kill()


if __name__ == "__main__":
    main()
