"""Thread endpoint routing at the edges: an unmatched request under the thread prefix is 404
(even when the path exists with another method), and a project endpoint hidden by a built-in
thread route is an error in ``validate``, at ``serve``'s start and in the app's collisions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

from standardagents import Runtime
from standardagents.cli import app as cli
from standardagents.server import create_app

API = "/api"

SHADOWED = {
    "agents/api/files/[*].py": """
        from standardagents import define_thread_endpoint

        @define_thread_endpoint
        async def all_files(req, state, params):
            return {"rest": params["*"]}
    """,
}


async def _thread(client: httpx.AsyncClient, headers: dict[str, str]) -> str:
    r = await client.post(f"{API}/threads", json={"agent": "helper"}, headers=headers)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def test_post_to_a_get_only_thread_endpoint_is_404(client: httpx.AsyncClient, actors: Any) -> None:
    tid = await _thread(client, actors.auth("alice"))
    r = await client.post(f"{API}/threads/{tid}/status", json={}, headers=actors.auth("alice"))
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"
    assert (await client.get(f"{API}/threads/{tid}/status", headers=actors.auth("alice"))).status_code == 200


async def test_unknown_thread_endpoint_and_catch_all_method_are_404(client: httpx.AsyncClient, actors: Any) -> None:
    tid = await _thread(client, actors.auth("alice"))
    for method, path in (("GET", "nope"), ("DELETE", "docs/a/b"), ("PATCH", "status")):
        r = await client.request(method, f"{API}/threads/{tid}/{path}", headers=actors.auth("alice"))
        assert r.status_code == 404, (method, path, r.status_code)


def test_validate_reports_a_thread_endpoint_hidden_by_a_built_in_route(tmp_path: Path) -> None:
    from server_fixtures import write_project

    root = write_project(tmp_path / "project", SHADOWED)
    result = CliRunner().invoke(cli, ["validate", str(root)])
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert "thread endpoint 'files/[*]'" in text
    assert "/api/threads/{thread_id}/files/{path:path}" in text


def test_serve_refuses_to_start_with_a_hidden_thread_endpoint(tmp_path: Path) -> None:
    from server_fixtures import write_project

    root = write_project(tmp_path / "project", SHADOWED)
    result = CliRunner().invoke(cli, ["serve", str(root), "--database-url", f"sqlite:///{tmp_path / 'x.db'}"])
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert "thread endpoint 'files/[*]'" in text and "/api/threads/{thread_id}/files/{path:path}" in text
    assert "serving" not in text


def test_a_project_without_hidden_routes_still_validates(project_dir: Path) -> None:
    result = CliRunner().invoke(cli, ["validate", str(project_dir)])
    assert result.exit_code == 0, result.output


async def test_the_app_lists_a_hidden_thread_endpoint_among_its_collisions(tmp_path: Path) -> None:
    from server_fixtures import write_project

    root = write_project(tmp_path / "project", SHADOWED)
    rt = await Runtime.open(root, database_url=f"sqlite:///{tmp_path / 'c.db'}")
    try:
        collisions = create_app(rt, close_runtime=False).state.server.endpoints.collisions
    finally:
        await rt.aclose()
    (hidden,) = collisions
    assert "'files/[*]'" in hidden and "GET/PUT /api/threads/{thread_id}/files/{path:path}" in hidden
