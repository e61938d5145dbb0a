"""Run a benchmark script against two source trees, interleaved, and print both.

A change's effect on a noisy machine is best read from one run where the two versions take
turns: ``python benchmarks/compare_trees.py --before /tmp/old/src --after src --rounds 9 --
benchmarks/output_overhead.py --runs 200 --rounds 1``. Each round runs the script once per
tree (``PYTHONPATH`` set to it) and keeps its printed figures; the medians per line label
and tree are printed at the end (the ``xN`` ratios each line prints are kept as they are).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from collections import defaultdict

_FIGURE = re.compile(r"^\s*(?P<label>[^:]+):(?P<rest>.*)$")
_NUMBER = re.compile(r"(?P<name>[A-Za-z]+)\s+(?P<value>[\d.]+)\s*µs/step\s*\(x(?P<ratio>[\d.]+)\)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="source folder of the old version (holds the package)")
    parser.add_argument("--after", required=True, help="source folder of the new version")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("script", nargs=argparse.REMAINDER, help="-- then the benchmark and its arguments")
    args = parser.parse_args()
    command = [a for a in args.script if a != "--"]
    figures: dict[tuple[str, str, str], list[tuple[float, float]]] = defaultdict(list)
    labels: list[str] = []
    for i in range(args.rounds):
        trees = [("before", args.before), ("after", args.after)]
        if i % 2:
            trees.reverse()  # neither version always runs first
        for tree, path in trees:
            env = {**os.environ, "PYTHONPATH": os.path.abspath(path)}
            out = subprocess.run([sys.executable, *command], capture_output=True, text=True, env=env, check=True).stdout
            for line in out.splitlines():
                match = _FIGURE.match(line)
                if match is None:
                    continue
                label = match["label"].strip()
                for number in _NUMBER.finditer(match["rest"]):
                    if label not in labels:
                        labels.append(label)
                    figures[(label, number["name"], tree)].append((float(number["value"]), float(number["ratio"])))
    print(f"{args.rounds} interleaved rounds of: {' '.join(command)}")
    for label in labels:
        for name in ("wall", "CPU"):
            parts = []
            for tree in ("before", "after"):
                got = figures.get((label, name, tree))
                if got:
                    parts.append(f"{tree} {statistics.median(v for v, _ in got):6.0f} µs/step "
                                 f"(x{statistics.median(r for _, r in got):5.3f})")
            if parts:
                print(f"{label:>18} {name:>4}: " + "   ".join(parts))


if __name__ == "__main__":
    main()
