"""A served process settles its garbage collector once it has started; an embedded app does not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from standardagents.server.app import ENV_PREFIX, GC_YOUNG_THRESHOLD

_PROBE = """
import asyncio, gc, json, sys
from standardagents import Runtime
from standardagents.server import create_app

async def main():
    rt = await Runtime.open(sys.argv[1], database_url="sqlite:///" + sys.argv[1] + "/gc.db")
    app = create_app(rt)
    async with app.router.lifespan_context(app):
        print(json.dumps({"frozen": gc.get_freeze_count(), "young": gc.get_threshold()[0]}))

asyncio.run(main())
"""


def _probe(tmp_path: Path, tune: bool) -> dict[str, int]:
    (tmp_path / "agents").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != f"{ENV_PREFIX}TUNE_GC"}
    if tune:
        env[f"{ENV_PREFIX}TUNE_GC"] = "1"
    out = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path)], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    result: dict[str, int] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_a_served_process_freezes_what_it_holds_after_start_and_collects_young_objects_less_often(
        tmp_path: Path) -> None:
    settled = _probe(tmp_path, tune=True)
    assert settled["frozen"] > 10_000
    assert settled["young"] == GC_YOUNG_THRESHOLD


def test_an_app_embedded_in_another_process_leaves_its_collector_alone(tmp_path: Path) -> None:
    untouched = _probe(tmp_path, tune=False)
    assert untouched == {"frozen": 0, "young": 700}
