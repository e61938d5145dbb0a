"""Memory of one server worker at scale: per idle thread, and per running streaming turn.

One ``standardagents serve`` process (``--workers 1``) on PostgreSQL. Its resident memory
(VmRSS) is read after a warm-up turn, again after ``--threads`` threads were created and each
read back once (idle threads: nothing runs), and again while ``--turns`` turns stream at once:
each turn's model reply (the OpenAI wire stub, in this process) sends a few chunks and then
stalls, so every turn is mid-stream when memory is read. Printed: the RSS deltas divided by
the counts.

    python benchmarks/memory_scale.py --threads 10000 --turns 1000

RSS moves in allocator-sized steps and includes what the first use of a code path loads; the
warm-up turn takes most of that out of the deltas, not all.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from serve_procs import (
    WORKER,
    database,
    free_port,
    make_token,
    serve,
    stop_group,
    wait_ready,
    write_project,
)

from standardagents.testing.openai_stub import OpenAIStub, StubReply

FILES = {
    "agents/agents/bench.py": """
        from standardagents import define_agent
        bench = define_agent(name="bench", type="ai_human",
                             side_a={"prompt": "bench_prompt", "stop_on_response": True, "max_steps": 4})
    """,
    "agents/prompts/bench_prompt.py": """
        from standardagents import define_prompt
        bench_prompt = define_prompt(name="bench_prompt", prompt="Answer.", model="stubbed")
    """,
}

TEXT = "A reply streamed in small pieces, which stalls after its first few chunks. " * 4


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise SystemExit(f"no VmRSS for process {pid}")


async def _streaming_turn(client: httpx.AsyncClient, thread_id: str, chunked: asyncio.Event) -> None:
    """A streamed turn; ``chunked`` is set at its first text chunk (then it is read until cancelled)."""
    async with client.stream("POST", f"/api/threads/{thread_id}/messages", params={"stream": "true"},
                             json={"content": "Say something long."}) as response:
        response.raise_for_status()
        buffer = ""
        async for text in response.aiter_text():
            buffer += text
            while "\n\n" in buffer:
                frame, buffer = buffer.split("\n\n", 1)
                data = next((ln[6:] for ln in frame.splitlines() if ln.startswith("data: ")), None)
                if data is not None and json.loads(data)["type"] == "message_chunk":
                    chunked.set()


async def _measure(base: str, headers: dict[str, str], threads: int, turns: int) -> None:
    limits = httpx.Limits(max_connections=turns + 20, max_keepalive_connections=turns + 20)
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=600, limits=limits) as client:
        pid = int((await client.get("/api/agents")).headers[WORKER])
        warm = (await client.post("/api/threads", json={"agent": "bench"})).json()["id"]
        sent = await client.post(f"/api/threads/{warm}/messages", params={"wait": "true"},
                                 json={"content": "warm up"})
        sent.raise_for_status()
        base_rss = _rss_kib(pid)
        print(f"worker {pid}: RSS after a warm-up turn {base_rss / 1024:.1f} MiB")

        start = time.perf_counter()
        sem = asyncio.Semaphore(50)

        async def one() -> str:
            async with sem:
                for attempt in range(3):  # a kept-alive connection the server just closed fails once
                    try:
                        r = await client.post("/api/threads", json={"agent": "bench"})
                        r.raise_for_status()
                        tid = str(r.json()["id"])
                        (await client.get(f"/api/threads/{tid}")).raise_for_status()
                        return tid
                    except httpx.TransportError:
                        if attempt == 2:
                            raise
                raise AssertionError("unreachable")

        ids = await asyncio.gather(*(one() for _ in range(threads)))
        idle_rss = _rss_kib(pid)
        print(f"{threads} idle threads (created and read back in {time.perf_counter() - start:.1f} s): "
              f"RSS {idle_rss / 1024:.1f} MiB, +{(idle_rss - base_rss) / 1024:.1f} MiB, "
              f"{(idle_rss - base_rss) * 1024 / threads:.0f} bytes per thread")

        chunked = [asyncio.Event() for _ in range(turns)]
        start = time.perf_counter()
        tasks = [asyncio.create_task(_streaming_turn(client, tid, ev)) for tid, ev in zip(ids, chunked, strict=False)]
        try:
            await asyncio.wait_for(asyncio.gather(*(ev.wait() for ev in chunked)), 600)
            running_rss = _rss_kib(pid)
            print(f"{turns} turns streaming at once (all mid-reply after {time.perf_counter() - start:.1f} s): "
                  f"RSS {running_rss / 1024:.1f} MiB, +{(running_rss - idle_rss) / 1024:.1f} MiB over the idle "
                  f"threads, {(running_rss - idle_rss) / turns:.0f} KiB per running turn")
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def _run(args: argparse.Namespace) -> None:
    stall = StubReply(text=TEXT, chunk_size=8, stall_after_chunks=3, stall_seconds=3600)
    with OpenAIStub(lambda body: stall if "warm" not in json.dumps(body.get("messages", [])[-1:]) else "Warm.") as stub, \
            tempfile.TemporaryDirectory(prefix="sa-mem-") as tmp:
        project = write_project(Path(tmp) / "project", stub.base_url, FILES)
        async with database() as url:
            token = await make_token(url)
            headers = {"Authorization": f"Bearer {token}"}
            port = free_port()
            proc = serve(project, port, url, 1, log=Path(tmp) / "server.log")
            try:
                await wait_ready(f"http://127.0.0.1:{port}", headers)
                print(f"serve --workers 1 on PostgreSQL; {args.threads} threads, {args.turns} streaming turns")
                await _measure(f"http://127.0.0.1:{port}", headers, args.threads, args.turns)
            finally:
                stop_group(proc)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=1_000)
    args = parser.parse_args(argv)
    if not 1 <= args.turns <= args.threads <= 100_000:
        parser.error("need 1 <= --turns <= --threads <= 100000")
    asyncio.run(_run(args))


if __name__ == "__main__":
    main()
