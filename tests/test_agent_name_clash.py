"""A project agent and an installed packed agent with the same name: reported, and both addressable.

The project's agent keeps the bare name; the packed one is ``package/name`` in ``validate``,
``GET /api/agents``, the OpenAI door's ``GET /v1/models`` and wherever an agent is named.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from packages_fixtures import write_files
from server_fixtures import LiveServer, serve_app
from standardagents.packages import pack_project

PACKED = "standardagent-assistant/assistant"

SOURCE = {
    "agents/agents/assistant.py": """
        from standardagents import define_agent

        assistant = define_agent(name="assistant", description="The packed one.",
                                 side_a={"prompt": "packed_prompt", "max_steps": 2})
    """,
    "agents/prompts/packed_prompt.py": """
        from standardagents import define_prompt

        packed_prompt = define_prompt(name="packed_prompt", prompt="You are the packed assistant.")
    """,
}

HOST = {
    "agents/agents/assistant.py": """
        from standardagents import define_agent

        assistant = define_agent(name="assistant", description="The project's own.",
                                 side_a={"prompt": "host_prompt", "max_steps": 2})
    """,
    "agents/prompts/host_prompt.py": """
        from standardagents import define_prompt

        host_prompt = define_prompt(name="host_prompt", prompt="You are the host's assistant.")
    """,
}


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A project whose ``assistant`` clashes with the packed ``assistant`` in its agents/packed/."""
    project = write_files(tmp_path / "host", HOST)
    pack_project(write_files(tmp_path / "source", SOURCE), "assistant", out_dir=project / "agents" / "packed")
    return project


@pytest.fixture
def server(host: Path, tmp_path: Path) -> Iterator[LiveServer]:
    yield from serve_app(host, f"sqlite+aiosqlite:///{tmp_path / 'clash.db'}")


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("standardagents")
    return [str(script)] if script.exists() else [shutil.which("standardagents") or "standardagents"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*_cli(), *args], capture_output=True, text=True, timeout=120,
                          env={"COLUMNS": "400", "PATH": str(Path(sys.executable).parent)})


def test_validate_reports_the_clash_naming_both_origins_and_addresses(host: Path) -> None:
    proc = _run("validate", str(host))
    output = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 0, output
    assert "warning" in output and "agent name 'assistant' is used more than once" in output
    assert "the project's agents/agents/assistant.py (called 'assistant')" in output
    assert f"packed package standardagent-assistant (called '{PACKED}')" in output
    assert "ok: 2 agent(s)" in output


def test_run_takes_the_packed_agent_by_its_package_name(host: Path) -> None:
    proc = _run("run", str(host), "--agent", PACKED, "hello")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "hello" in proc.stdout  # the offline model answers with the message it got


async def test_the_api_lists_each_agent_under_a_name_that_starts_it(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as c:
        listed = (await c.get("/api/agents")).json()["agents"]
        assert {(a["name"], a["package"], a["description"]) for a in listed} == {
            ("assistant", None, "The project's own."),
            (PACKED, "standardagent-assistant", "The packed one."),
        }
        own = await c.post("/api/threads", json={"agent": "assistant"})
        packed = await c.post("/api/threads", json={"agent": PACKED})
        unknown = await c.post("/api/threads", json={"agent": "nobody/assistant"})
    assert own.status_code == 201 and own.json()["package"] is None
    assert packed.status_code == 201 and packed.json()["package"] == "standardagent-assistant"
    assert packed.json()["agent_id"] == "assistant"
    assert unknown.status_code == 422
    assert "unknown agent 'nobody/assistant'" in unknown.text and PACKED in unknown.text


async def test_the_openai_door_names_the_packed_agent_by_package(server: LiveServer) -> None:
    async with openai.AsyncOpenAI(base_url=f"{server.base_url}/v1", api_key=server.token, max_retries=0) as client:
        models = await client.models.list()
        assert sorted((m.id, m.owned_by) for m in models.data) == [
            ("assistant", "project"), (PACKED, "standardagent-assistant")]
        raw = await client.chat.completions.with_raw_response.create(
            model=PACKED, messages=[{"role": "user", "content": "hello"}])
        thread_id = raw.headers["x-thread-id"]
        again = await client.chat.completions.with_raw_response.create(
            model=PACKED, messages=[{"role": "user", "content": "again"}], extra_body={"thread": thread_id})
        with pytest.raises(openai.UnprocessableEntityError) as wrong:
            await client.chat.completions.create(
                model="assistant", messages=[{"role": "user", "content": "x"}], extra_body={"thread": thread_id})
    assert raw.parse().choices[0].message.content
    assert again.headers["x-thread-id"] == thread_id
    assert f"belongs to agent '{PACKED}'" in str(wrong.value)
    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as c:
        thread = (await c.get(f"/api/threads/{thread_id}")).json()
    assert thread["package"] == "standardagent-assistant"
