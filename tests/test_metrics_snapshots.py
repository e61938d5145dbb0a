"""Metrics with several worker processes: a scrape adds the other workers' snapshots to its own
in-memory sums, and a worker that stopped leaves the running-executions gauge (real processes)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from standardagents.observability import metrics

WORKER = textwrap.dedent("""
    import os, sys, time
    from standardagents.observability import metrics

    meter = metrics.enable()
    for _ in range(3):
        meter.turn_started("assistant")
    meter.turn_ended("assistant", "response", 0.2)
    meter.tool_call("add", "success")
    path = os.path.join(os.environ["PROMETHEUS_MULTIPROC_DIR"], f"standardagents-{os.getpid()}.json")
    deadline = time.monotonic() + 10
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)
    print("READY" if os.path.exists(path) else "NO SNAPSHOT", flush=True)
    sys.stdin.read()
    metrics.process_exit()
""")


def _value(body: bytes, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


Worker = tuple["subprocess.Popen[str]", metrics.Meter]


@pytest.fixture
def worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Worker]:
    monkeypatch.setenv(metrics.MULTIPROC_ENV, str(tmp_path))
    monkeypatch.delenv(metrics.SETTING_ENV, raising=False)
    proc = subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
    meter = metrics.Meter()
    try:
        yield proc, meter
    finally:
        meter.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()


def test_a_scrape_adds_the_other_workers_sums_to_its_own(worker: Worker) -> None:
    _, meter = worker
    meter.turn_started("assistant")
    meter.turn_started("assistant")
    meter.tool_call("add", "success")
    body, _ = meter.exposition()
    assert _value(body, "standardagents_turns_started_total", agent="assistant") == 5
    assert _value(body, "standardagents_turns_ended_total", agent="assistant", outcome="response") == 1
    assert _value(body, "standardagents_turn_duration_seconds_count", agent="assistant") == 1
    assert _value(body, "standardagents_turn_duration_seconds_bucket", agent="assistant", le="0.25") == 1
    assert _value(body, "standardagents_turn_duration_seconds_bucket", agent="assistant", le="0.1") == 0
    assert _value(body, "standardagents_tool_calls_total", tool="add", status="success") == 2
    assert _value(body, "standardagents_running_executions") == 4


def test_a_stopped_worker_keeps_its_counts_but_no_longer_runs_anything(worker: Worker) -> None:
    proc, meter = worker
    meter.turn_started("assistant")
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0
    body, _ = meter.exposition()
    assert _value(body, "standardagents_turns_started_total", agent="assistant") == 4
    assert _value(body, "standardagents_running_executions") == 1


def test_a_forked_worker_counts_from_zero_in_a_snapshot_of_its_own(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setenv(metrics.MULTIPROC_ENV, str(tmp_path))
    meter = metrics.Meter()
    try:
        meter.turn_started("assistant")
        pid = os.fork()
        if pid == 0:  # the child records one turn of its own, waits for its snapshot, and leaves
            code = 1
            try:
                meter.turn_started("researcher")
                assert meter._flusher is not None
                meter._flusher.flush()
                code = 0 if os.path.exists(os.path.join(str(tmp_path), f"standardagents-{os.getpid()}.json")) else 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        body, _ = meter.exposition()
    finally:
        meter.close()
    assert _value(body, "standardagents_turns_started_total", agent="assistant") == 1
    assert _value(body, "standardagents_turns_started_total", agent="researcher") == 1
    assert _value(body, "standardagents_running_executions") == 1  # the child has gone
