"""What recording the Prometheus instruments costs: µs of CPU per step (a step's duration, a
model call with its time to first token and tokens, a tool call) and per served turn (turn
started and ended, one HTTP request), in one process and with ``--workers`` (multiprocess
folder set), for this checkout and, with ``--baseline SRC``, another tree's ``src`` folder.

Each (tree, mode) runs in a fresh process, alternating round by round so that machine load
hits them alike; figures are medians over rounds.

Usage: ``python benchmarks/metrics_cost.py [--rounds 5] [--n 20000] [--baseline /tmp/base/src]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent / "src"


class _Usage:
    prompt_tokens = 120
    completion_tokens = 30


def _worker(n: int) -> dict[str, float]:
    from standardagents.observability import metrics

    meter = metrics.enable()
    assert meter is not None
    usage = _Usage()
    for _ in range(1000):  # warm: label children exist
        meter.step("assistant", 0.01)
        meter.model_call("stub", 0.05, 0.01, usage, "ok")
        meter.tool_call("add", "success")
        meter.turn_started("assistant")
        meter.turn_ended("assistant", "response", 0.1)
        meter.http_request("POST", "/api/threads/{thread_id}/messages", 200, 0.1)
    start = time.process_time()
    for _ in range(n):
        meter.step("assistant", 0.01)
        meter.model_call("stub", 0.05, 0.01, usage, "ok")
        meter.tool_call("add", "success")
    step = (time.process_time() - start) / n
    start = time.process_time()
    for _ in range(n):
        meter.turn_started("assistant")
        meter.turn_ended("assistant", "response", 0.1)
        meter.http_request("POST", "/api/threads/{thread_id}/messages", 200, 0.1)
    turn = (time.process_time() - start) / n
    body, _ = meter.exposition()
    assert b"standardagents_turns_started_total" in body
    return {"step": step * 1e6, "turn": turn * 1e6}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--baseline", default=None, help="another tree's src folder")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(args.n)))
        return
    trees = {"this": str(HERE)}
    if args.baseline:
        trees["baseline"] = args.baseline
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(args.rounds):
        for tree, src in trees.items():
            for mode in ("one process", "workers"):
                env = {k: v for k, v in os.environ.items() if k not in ("PROMETHEUS_MULTIPROC_DIR",)}
                env["PYTHONPATH"] = src
                env.pop("STANDARDAGENTS_METRICS", None)
                with tempfile.TemporaryDirectory() as folder:
                    if mode == "workers":
                        env["PROMETHEUS_MULTIPROC_DIR"] = folder
                    out = subprocess.run([sys.executable, __file__, "--worker", "--n", str(args.n)], env=env,
                                         capture_output=True, text=True, timeout=300, check=True)
                results.setdefault((tree, mode), []).append(json.loads(out.stdout.strip().splitlines()[-1]))
    for (tree, mode), runs in results.items():
        step = statistics.median(r["step"] for r in runs)
        turn = statistics.median(r["turn"] for r in runs)
        print(f"{tree}, {mode}: {step:.1f} µs per step, {turn:.1f} µs per turn")


if __name__ == "__main__":
    main()
