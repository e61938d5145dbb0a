"""``standardagents tokens``: tokens created on the command line open the API; revoked ones do not."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from typer.testing import CliRunner

from standardagents import Runtime
from standardagents.server import create_app
from standardagents.server.cli import tokens_app


def _db(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"


def test_create_prints_a_token_and_creates_the_user(project_dir: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(tokens_app, ["create", "carol", "--admin", "--project", str(project_dir),
                                             "--database-url", _db(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "created user carol (admin)" in result.stderr
    assert result.stdout.strip().startswith("sat_")


def test_list_shows_tokens_without_secrets(project_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["--project", str(project_dir), "--database-url", _db(tmp_path)]
    created = runner.invoke(tokens_app, ["create", "carol", "--name", "laptop", *args])
    listed = runner.invoke(tokens_app, ["list", *args])
    assert listed.exit_code == 0
    assert "laptop" in listed.stdout
    assert "carol" in listed.stdout
    assert created.stdout.strip() not in listed.stdout


def test_revoke_of_unknown_token_exits_1(project_dir: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(tokens_app, ["revoke", "tok_nope", "--project", str(project_dir),
                                             "--database-url", _db(tmp_path)])
    assert result.exit_code == 1


async def _me(project_dir: Path, db: str, secret: str) -> httpx.Response:
    rt = await Runtime.open(project_dir, database_url=db)
    try:
        app = create_app(rt, close_runtime=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            return await c.get("/api/users/me", headers={"Authorization": f"Bearer {secret}"})
    finally:
        await rt.aclose()


def test_cli_token_opens_the_api_until_revoked(project_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["--project", str(project_dir), "--database-url", _db(tmp_path)]
    secret = runner.invoke(tokens_app, ["create", "dave", *args]).stdout.strip()
    token_id = runner.invoke(tokens_app, ["list", *args]).stdout.split("\t")[0]
    before = asyncio.run(_me(project_dir, _db(tmp_path), secret))
    revoked = runner.invoke(tokens_app, ["revoke", token_id, *args])
    after = asyncio.run(_me(project_dir, _db(tmp_path), secret))
    assert before.json()["id"] == "dave"
    assert revoked.exit_code == 0
    assert after.status_code == 401
