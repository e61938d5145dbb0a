"""Server responsiveness while another process writes to its SQLite database.

A served project (``standardagents serve``, SQLite file, offline model, a ``GET /api/health``
controller) is asked for its health every 20 ms, first with nobody else on the database, then
while another process (as a CLI command such as ``approve`` or ``effects run`` would) keeps
taking the write lock and holding a transaction open for ``--hold-ms``. The server's own
background writes (the effect scheduler's pass every 0.5 s) meet that lock; if they wait for
it on the event loop, every request waits too. Prints p50 / p95 / max latency of each phase.

    python benchmarks/sqlite_contention.py [--seconds 6] [--hold-ms 1000]

Loopback only; the server and the writer are stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import httpx

EXE = Path(sys.executable).parent / "standardagents"

FILES = {
    "agents/agents/helper.py": """
        from standardagents import define_agent
        helper = define_agent(name="helper", side_a={"prompt": "helper_prompt", "stop_on_response": True})
    """,
    "agents/prompts/helper_prompt.py": """
        from standardagents import define_prompt
        helper_prompt = define_prompt(name="helper_prompt", prompt="You help.")
    """,
    "agents/models/default.py": """
        from standardagents import define_model
        default = define_model(name="default", provider="test", model="offline")
    """,
    "agents/api/health.get.py": """
        from standardagents import define_controller

        @define_controller(access="public")
        async def health(ctx):
            return {"status": "ok"}
    """,
}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _measure(client: httpx.Client, url: str, seconds: float) -> list[float]:
    out: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        response = client.get(url)
        out.append((time.perf_counter() - t0) * 1000)
        response.raise_for_status()
        time.sleep(0.02)
    return out


WRITER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
hold = int(sys.argv[2]) / 1000
while True:
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO env_values (scope, scope_id, key, value, updated_at) VALUES "
                 "('instance', 'bench', 'k', '1', 0) ON CONFLICT DO UPDATE SET updated_at = updated_at + 1")
    time.sleep(hold)
    conn.execute("COMMIT")
    time.sleep(0.05)
"""


def _figures(label: str, ms: list[float]) -> str:
    ordered = sorted(ms)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return (f"{label:<28} n={len(ms):>4}  p50 {statistics.median(ms):8.1f} ms  p95 {p95:8.1f} ms  "
            f"max {max(ms):8.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="length of each phase")
    parser.add_argument("--hold-ms", type=int, default=1000, help="how long the other writer holds the lock")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "proj"
        for rel, text in FILES.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(textwrap.dedent(text))
        database = Path(tmp) / "bench.db"
        port = _free_port()
        env = {**os.environ, "STANDARDAGENTS_DATABASE_URL": f"sqlite:///{database}"}
        server = subprocess.Popen([str(EXE), "serve", str(root), "--port", str(port)], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}/api/health"
        try:
            with httpx.Client(timeout=30) as client:
                for _ in range(300):
                    try:
                        client.get(url).raise_for_status()
                        break
                    except httpx.HTTPError:
                        time.sleep(0.1)
                else:
                    raise SystemExit("the server did not start")
                idle = _measure(client, url, args.seconds)
                # another process takes the write lock again and again and holds it
                writer = subprocess.Popen([sys.executable, "-c", WRITER, str(database), str(args.hold_ms)],
                                          stdin=subprocess.DEVNULL)
                try:
                    busy = _measure(client, url, args.seconds)
                finally:
                    writer.terminate()
                    writer.wait(10)
            print(f"GET /api/health every 20 ms, SQLite; the other writer holds its lock {args.hold_ms} ms at a time")
            print(_figures("no other writer", idle))
            print(_figures("another process writing", busy))
        finally:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()


if __name__ == "__main__":
    main()
