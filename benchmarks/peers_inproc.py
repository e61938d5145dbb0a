"""Our runtime inside the peer frameworks' in-process benchmark (Benchmark A), in one run.

The peer harness (``bench_inproc.py`` and ``run_inproc.py`` in a copy of the peers folder)
measures openai-agents, pydantic-ai, langgraph and langchain with an instant fake model that asks
for the ``add`` tool until the conversation holds K tool results, then answers "done"; one run
is K+1 model calls and K tool calls, and µs/step = median run time / (K+1). This script adds
two cells in the same shape as theirs, without touching their files:

* ``standardagents``: our normal mode, every message persisted to a SQLite file (WAL);
* ``standardagents_memory``: the same on in-memory SQLite (``sqlite://``), which, like the
  peers, persists nothing.

Our fake model, like theirs, is stateless: it counts the ``role=tool`` messages of the request.
Each run starts a new thread, as each peer run starts a new conversation. ``Runtime.open``
(connect and migrate) is async, while the harness builds cells synchronously, so it happens in
the first warm-up run and is not part of ``import+build ms``.

Every cell runs in a fresh process and the framework order is shuffled per round, exactly as
``run_inproc.py`` does (its own loop is reused). The default is lighter than the peers' own
run: the async tool only (theirs also runs the sync tool), with their 5 rounds and their 200
runs at K=1 and 50 at K=20 per process, which takes about 5 minutes on 2 cores.

Usage::

    python benchmarks/peers_inproc.py --peers /path/to/peers-copy [--rounds 5] [--tools async]

It prints the peers' markdown table, then our µs/step divided by each peer's.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["OUR_FWS", "PEER_FWS", "build_standardagents", "main", "ratio_table"]

PEER_FWS = ["baseline", "pydantic_ai", "openai_agents", "openai_agents_trace", "langgraph", "langchain_agent"]
OUR_FWS = ["standardagents", "standardagents_memory"]
CELL_COMMAND = "_cell"

RunFn = Callable[[], Awaitable[str]]


# --------------------------------------------------------------------------- our cell
class _OpenRuntimes:
    """Runtimes opened by this process's cells, closed once the harness has measured them."""

    def __init__(self) -> None:
        self.closers: list[Callable[[], Awaitable[None]]] = []

    async def close_all(self) -> None:
        while self.closers:
            await self.closers.pop()()


_OPEN = _OpenRuntimes()


def build_standardagents(k: int, tool_kind: str, *, in_memory: bool) -> RunFn:
    """A peer-harness builder: returns ``run()``, one agent run of K tool rounds on a new thread."""
    from standardagents import Runtime, define_agent, define_model, define_prompt, define_tool
    from standardagents.project import build_registry
    from standardagents.providers.base import ModelProvider, ModelRequest, ModelResponse
    from standardagents.records import ToolCall
    from standardagents.store import open_store

    arguments = '{"a": 1, "b": 2}'

    class CountingModel(ModelProvider):
        """Answers at once: a call to ``add`` while the request holds fewer than K tool results."""

        async def request(self, request: ModelRequest) -> ModelResponse:
            n = sum(1 for m in request.messages if m.get("role") == "tool")
            if n < k:
                return ModelResponse(tool_calls=[ToolCall(f"c{n}", "add", arguments)])
            return ModelResponse(text="done")

    if tool_kind == "async":
        async def add_async(a: int, b: int) -> int:
            """Add two ints."""
            return a + b

        add = define_tool(add_async, name="add")
    else:
        def add_sync(a: int, b: int) -> int:
            """Add two ints."""
            return a + b

        add = define_tool(add_sync, name="add")

    registry = build_registry(
        define_agent(name="bench", side_a={"prompt": "bench_prompt", "max_steps": k + 10}),
        define_prompt(name="bench_prompt", prompt="You add.", tools=["add"]),
        define_model(name="default", provider="test", model="instant", stream=False),
        add,
    )
    folder = None if in_memory else tempfile.mkdtemp(prefix="sa-peers-")
    url = "sqlite://" if folder is None else f"sqlite:///{Path(folder) / 'bench.db'}"
    runtime: list[Runtime] = []

    async def close() -> None:
        for rt in runtime:
            await rt.aclose()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    _OPEN.closers.append(close)

    async def run() -> str:
        if not runtime:
            rt = await Runtime.open(registry, store=open_store(url))
            rt.use_provider("default", CountingModel())
            runtime.append(rt)
        result = await runtime[0].run("bench", "hi")
        assert result.stop_reason == "complete" and result.text == "done", result
        return result.text

    return run


def _register(bench: ModuleType) -> None:
    """Add our builders to the harness's table, in its ``(k, tool_kind) -> run`` shape."""
    bench.BUILDERS["standardagents"] = lambda k, t: build_standardagents(k, t, in_memory=False)
    bench.BUILDERS["standardagents_memory"] = lambda k, t: build_standardagents(k, t, in_memory=True)


def _run_cell(peers: Path, harness_args: Sequence[str]) -> None:
    """One cell in this process: the peers' ``bench_inproc.main`` with our builders registered."""
    sys.path.insert(0, str(peers))
    bench = importlib.import_module("bench_inproc")
    _register(bench)
    measure = bench.amain

    async def measure_then_close(args: argparse.Namespace) -> None:
        try:
            await measure(args)
        finally:
            await _OPEN.close_all()

    setattr(bench, "amain", measure_then_close)  # noqa: B010 - the harness's main() looks it up
    sys.argv = ["bench_inproc.py", *harness_args]
    bench.main()


# --------------------------------------------------------------------------- orchestration
class _CellLauncher:
    """Stands in for ``subprocess`` inside ``run_inproc``: starts each cell through this script."""

    TimeoutExpired = subprocess.TimeoutExpired

    def __init__(self, peers: Path) -> None:
        self.peers = peers
        self.bench_path = str(peers / "bench_inproc.py")

    def run(self, cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if len(cmd) >= 2 and cmd[1] == self.bench_path:
            cmd = [cmd[0], os.path.abspath(__file__), CELL_COMMAND, "--peers", str(self.peers), *cmd[2:]]
        return subprocess.run(cmd, **kwargs)


def _load_rows(path: Path) -> list[dict[str, Any]]:
    import json

    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def ratio_table(rows: list[dict[str, Any]], ours: Sequence[str], peers: Sequence[str], tools: Sequence[str]) -> str:
    """Markdown: each of our cells' µs/step divided by each peer's (median over rounds)."""
    import statistics

    def step(fw: str, k: int, tool: str) -> float | None:
        xs = [r["step_med_us"] for r in rows if r["fw"] == fw and r["k"] == k and r["tool"] == tool]
        return statistics.median(xs) if xs else None

    lines = ["| ours / peer (µs/step) | tool | " + " | ".join(f"K={k}" for k in (1, 20)) + " |",
             "|---|---|---|---|"]
    for tool in tools:
        for mine in ours:
            for peer in peers:
                cells = []
                for k in (1, 20):
                    a, b = step(mine, k, tool), step(peer, k, tool)
                    cells.append(f"{a / b:.2f}" if a is not None and b else "n/a")
                lines.append(f"| {mine} / {peer} | {tool} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _orchestrate(argv: Sequence[str] | None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peers", type=Path, required=True, help="a writable copy of the peers folder")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs1", type=int, default=200, help="runs per process for K=1")
    parser.add_argument("--runs20", type=int, default=50, help="runs per process for K=20")
    parser.add_argument("--tools", default="async", help="async, sync or async,sync")
    parser.add_argument("--fws", default=",".join(PEER_FWS + OUR_FWS))
    parser.add_argument("--out", type=Path, default=None,
                        help="raw JSONL (default: PEERS/raw_inproc_standardagents.jsonl)")
    parser.add_argument("--timeout", type=int, default=300, help="per-process timeout (s)")
    args = parser.parse_args(argv)
    peers = args.peers.resolve()
    if not (peers / "bench_inproc.py").is_file() or not (peers / "run_inproc.py").is_file():
        parser.error(f"{peers} has no bench_inproc.py and run_inproc.py: pass a copy of the peers folder")
    out = (args.out or peers / "raw_inproc_standardagents.jsonl").resolve()

    sys.path.insert(0, str(peers))
    harness = importlib.import_module("run_inproc")
    setattr(harness, "subprocess", _CellLauncher(peers))  # noqa: B010 - its loop calls subprocess.run
    sys.argv = ["run_inproc.py", "--rounds", str(args.rounds), "--runs1", str(args.runs1),
                "--runs20", str(args.runs20), "--tools", args.tools, "--fws", args.fws,
                "--out", str(out), "--timeout", str(args.timeout)]
    harness.main()

    fws = args.fws.split(",")
    ours = [fw for fw in fws if fw in OUR_FWS]
    others = [fw for fw in fws if fw not in OUR_FWS]
    if ours and others:
        print()
        print(ratio_table(_load_rows(out), ours, others, args.tools.split(",")))
    print(f"\nraw rows: {out}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == [CELL_COMMAND]:
        cell = argparse.ArgumentParser(prog=f"peers_inproc.py {CELL_COMMAND}")
        cell.add_argument("--peers", type=Path, required=True)
        known, rest = cell.parse_known_args(argv[1:])
        _run_cell(known.peers.resolve(), rest)
    else:
        _orchestrate(argv)


if __name__ == "__main__":
    main()
