"""What the fence (every write of a running execution conditional on its epoch) costs a step,
in instructions counted by valgrind's callgrind: deterministic where times on a shared machine
are not.

The workload is ``tracing_overhead.py``'s (an instant in-process model asks for the ``add``
tool K times, then answers; everything persisted to a SQLite file), observability off. It runs
twice under callgrind, counting only the measured turns:

* ``fenced``: this checkout as it is;
* ``unfenced``: the same code with the fence taken out in the measuring process: the
  execution record's upsert without its epoch condition, no fence on the steps' writes, and
  no ownership check before a tool round.

Usage: ``python benchmarks/fence_overhead.py [--runs 40] [--k 10]``; ``PYTHONPATH=<other
tree>/src`` measures another tree (``git worktree add /tmp/base HEAD``).

Figures (``--runs 40 --k 10``): with the fenced first message of a step inserted by a plain
``INSERT ... SELECT ... WHERE EXISTS``, 945,222 fenced against 895,020 unfenced instructions
per step (+5.6%); SQLite wrote a statement journal for that insert (a statement that may
insert several rows and abort). With ``INSERT OR FAIL`` (one row at most: failing keeps what
aborting kept) 930,604 against 913,866 (+1.8%).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _unfence() -> None:
    """Take the fence out of this process (before any store is opened)."""
    from standardagents.engine import runtime, turns
    from standardagents.store import ops
    from standardagents.store.schema import executions

    cols = [c.name for c in executions.columns if c.name not in ("id", "thread_id", "created_at")]
    ops.UPSERT_EXEC = ops._upsert(executions, ["id"], cols)
    turns.Fence = lambda *_args: None  # type: ignore[assignment,misc]
    runtime.Runtime.owned_recently = lambda _self, _execution: True  # type: ignore[method-assign,assignment,misc]


def _count(valgrind: str, mode: str, runs: int, k: int) -> float:
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    env["PYTHONHASHSEED"] = "0"
    env["STANDARDAGENTS_EXECUTION_LEASE"] = "86400"  # no heartbeat within a run (see tracing_overhead)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run([valgrind, "--tool=callgrind", "--dump-before=getloadavg", f"--callgrind-out-file={out}",
                        sys.executable, __file__, "--worker", mode, "--runs", str(runs), "--k", str(k)],
                       env=env, capture_output=True, text=True, check=True)
        found = re.search(r"^summary: (\d+)$", Path(f"{out}.2").read_text(), re.MULTILINE)
    if found is None:
        raise SystemExit(f"callgrind wrote no summary for {mode}")
    return int(found.group(1)) / (runs * (k + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        if args.worker == "unfenced":
            _unfence()
        from tracing_overhead import _worker

        _worker("off", args.runs, args.k, warmup=5)
        return
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("valgrind is not installed (e.g. apt-get install valgrind)")
    fenced = _count(valgrind, "fenced", args.runs, args.k)
    unfenced = _count(valgrind, "unfenced", args.runs, args.k)
    print(f"instructions per step (callgrind; {args.runs} turns of {args.k} tool steps + 1 answer)")
    print(f"  unfenced {unfenced:12,.0f}")
    print(f"  fenced   {fenced:12,.0f}   fenced / unfenced = {fenced / unfenced:.4f} (target <= 1.05)")


if __name__ == "__main__":
    main()
