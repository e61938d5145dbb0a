"""``/api/evals``: stored runs and their cases, an execution's scores, capture from the
inspector; admins only for the project's runs, JSON errors for bad input."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import yaml

from evals_helpers import make_project
from standardagents import Runtime
from standardagents.evals import load_dataset, run_experiment
from standardagents.evals.storage import save_run
from standardagents.server import create_app

DATASET = "agent: assistant\ncases:\n  - {name: multiplies, input: 'What is 12 * 7?', expect: {contains: '84'}}\n"


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Runtime, httpx.AsyncClient, Path]]:
    project = make_project(tmp_path, {"basic.yaml": DATASET})
    rt = await Runtime.open(project, database_url=f"sqlite:///{project / 'eval.db'}", take_over=False)
    app = create_app(rt, dev=True, close_runtime=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        yield rt, client, project
    await rt.aclose()


async def test_runs_are_listed_newest_first_and_read_with_their_cases(
        served: tuple[Runtime, httpx.AsyncClient, Path]) -> None:
    rt, client, project = served
    report = await run_experiment(rt, [load_dataset(project / "evals" / "basic.yaml")])
    await save_run(rt.store, report)
    listed = (await client.get("/api/evals/runs")).json()["runs"]
    one = await client.get(f"/api/evals/runs/{report['id']}")
    assert [(r["id"], r["passed"], r["failed"]) for r in listed] == [(report["id"], 1, 0)]
    assert one.status_code == 200
    assert [(c["name"], c["passed"], c["reply"]) for c in one.json()["cases"]] == [("multiplies", True, "12 * 7 = 84")]
    scores = await client.get(f"/api/evals/executions/{report['cases'][0]['executionId']}/scores")
    assert [(s["name"], s["passed"], s["source"]) for s in scores.json()["scores"]] == [("contains", True, "experiment")]


async def test_unknown_run_is_404_with_a_json_error(served: tuple[Runtime, httpx.AsyncClient, Path]) -> None:
    _rt, client, _project = served
    r = await client.get("/api/evals/runs/evrun_nope")
    assert r.status_code == 404
    assert r.json()["error"]["message"] == "unknown eval run 'evrun_nope'"


async def test_bad_paging_is_400(served: tuple[Runtime, httpx.AsyncClient, Path]) -> None:
    _rt, client, _project = served
    r = await client.get("/api/evals/runs?limit=lots")
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "limit must be a whole number from 0 to 500 (got 'lots')"


async def test_capture_adds_the_turn_to_the_projects_dataset_file(served: tuple[Runtime, httpx.AsyncClient, Path]) -> None:
    rt, client, project = served
    result = await rt.run("assistant", "What is 12 * 7?")
    r = await client.post("/api/evals/capture", json={"threadId": result.thread_id, "dataset": "from_inspector"})
    assert r.status_code == 201, r.text
    assert r.json()["file"] == "evals/from_inspector.yaml"
    assert (r.json()["modelReplies"], r.json()["toolCalls"]) == (2, 1)
    written = yaml.safe_load((project / "evals" / "from_inspector.yaml").read_text())
    assert written["agent"] == "assistant"
    assert [c["reference"] for c in written["cases"]] == ["12 * 7 = 84"]


async def test_capture_of_an_unknown_thread_is_404_and_a_bad_name_422(
        served: tuple[Runtime, httpx.AsyncClient, Path]) -> None:
    _rt, client, project = served
    missing = await client.post("/api/evals/capture", json={"threadId": "thr_missing"})
    bad = await client.post("/api/evals/capture", json={"threadId": "thr_x", "dataset": "../escape"})
    assert missing.status_code == 404
    assert bad.status_code == 422
    assert bad.json()["error"]["message"] == "dataset: '../escape' is not a plain file name (letters, digits, - and _)"
    assert sorted(p.name for p in (project / "evals").iterdir()) == ["basic.yaml"]


async def test_runs_are_for_admins_only(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    rt = await Runtime.open(project, database_url=f"sqlite:///{project / 'eval.db'}", take_over=False)
    user = await rt.store.create_user("bob")
    _record, token = await rt.store.create_api_token(user.id, "t")
    app = create_app(rt, close_runtime=False)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            r = await client.get("/api/evals/runs", headers={"Authorization": f"Bearer {token}"})
    finally:
        await rt.aclose()
    assert r.status_code == 403
    assert r.json()["error"]["message"] == "only an admin may read or write the project's evals"
