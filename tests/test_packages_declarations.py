"""Packs carry everything an agent needs and say what its tools touch: each packed tool's
declarations (state it uses, variables, network hosts and grants) in ``__meta``, shown by
``standardagents packages`` before any of the package's code runs; the project's provider
definitions and user endpoints travel too, and work in the host that installs the pack (its
``agents/packed/`` folder), the agent answering through its packed provider to the OpenAI wire
stub and the user endpoint answering over HTTP."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from packages_fixtures import write_files, write_host
from standardagents import Runtime
from standardagents.packages import cli as packages_cli
from standardagents.packages import discover_packages, pack_project
from standardagents.packages.discover import load_project_with_packages
from standardagents.packages.unpack import read_packed_module
from standardagents.project import load_project_problems
from standardagents.server import create_app
from standardagents.testing import OpenAIStub, StubReply

PACKAGE = "standardagent-scout"

SCOUT = {
    "agents/agents/scout.py": """
        from standardagents import define_agent
        scout = define_agent(name="scout", side_a={"prompt": "scout_prompt", "stop_on_response": True, "max_steps": 3})
    """,
    "agents/prompts/scout_prompt.py": """
        from standardagents import define_prompt
        scout_prompt = define_prompt(name="scout_prompt", prompt="You scout.", model="scout_model", tools=["lookup"])
    """,
    "agents/models/scout_model.py": """
        from standardagents import define_model
        scout_model = define_model(name="scout_model", provider="relay", model="stub-model", max_retries=0)
    """,
    "agents/providers/relay.py": """
        from standardagents import define_provider, provider_env
        relay = define_provider(name="relay", description="Our relay", extends="openai",
                                config={"base_url": provider_env("RELAY_URL")})
    """,
    "agents/tools/lookup.py": """
        from standardagents import NetworkUse, define_tool

        @define_tool(variables={"region": {"type": "string", "default": "eu"},
                                "api_key": {"type": "secret", "description": "The lookup key."}},
                     network={"allow": ["api.example.com"], "credentials": {"api.example.com": "github"}})
        async def lookup(city: str, state: NetworkUse) -> str:
            '''Look a city up.

            Args:
                city: The city.
            '''
            return (await state.fetch(f"https://api.example.com/{city}")).text
    """,
    "agents/api/scout_status.py": """
        from standardagents import define_user_endpoint

        @define_user_endpoint
        async def scout_status(request, user):
            return {"scout": "ready", "user": user.name}
    """,
}

DECLARED = {"lookup": {
    "uses": ["network"],
    "variables": {"region": {"type": "string", "description": "", "required": False, "default": "eu"},
                  "api_key": {"type": "secret", "description": "The lookup key.", "required": True}},
    "network": {"allow": ["api.example.com"], "timeout": 10.0, "maxBytes": 1048576,
                "credentials": {"api.example.com": "github"}},
}}


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A host project whose agents/packed/ holds the packed scout."""
    root = write_host(tmp_path / "host")
    pack_project(write_files(tmp_path / "scout", SCOUT), "scout", out_dir=root / "agents" / "packed")
    return root


def test_pack_carries_each_tools_declarations_in_its_meta(host: Path) -> None:
    (info,) = [p for p in discover_packages(host, installed=False) if p.package_id == PACKAGE]
    assert info.tool_declarations == DECLARED


def test_packages_lists_what_each_packed_tool_touches(host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(packages_cli.console, "width", 400)
    result = CliRunner().invoke(packages_cli.packages_app, ["packages", str(host)])
    assert result.exit_code == 0, result.output
    assert ("tool lookup: uses network; variables region (string, default 'eu'), api_key (secret, required); "
            "network api.example.com (grant github -> api.example.com)") in result.output


def test_pack_carries_the_providers_its_models_name_and_the_projects_user_endpoints(host: Path) -> None:
    target = host / "agents" / "packed" / PACKAGE
    table = tomllib.loads((target / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["standardagent"]
    packed = read_packed_module(next(p for p in target.iterdir() if (p / "__init__.py").is_file()))
    assert (table["providers"], table["userEndpoints"]) == (["relay"], ["scout_status"])
    assert sorted(packed["_sources"].values()) == sorted(
        ["agents/agents/scout.py", "agents/prompts/scout_prompt.py", "agents/models/scout_model.py",
         "agents/providers/relay.py", "agents/tools/lookup.py", "agents/api/scout_status.py"])


def test_the_packed_provider_and_user_endpoint_are_registered_in_the_packages_namespace(host: Path) -> None:
    registry = load_project_with_packages(host, installed=False)
    provider = registry.find("providers", "relay", PACKAGE)
    endpoint = [e for e in registry.all_entries("user_endpoints") if e.name == "scout_status"]
    assert (provider is not None and provider.package, [e.package for e in endpoint]) == (PACKAGE, [PACKAGE])


def test_a_packed_provider_named_like_the_hosts_own_is_reported_and_left_out(host: Path) -> None:
    write_files(host, {"agents/providers/relay.py": """
        from standardagents import define_provider, provider_env
        relay = define_provider(name="relay", extends="openai", config={"base_url": provider_env("HOST_RELAY_URL")})
    """})
    _, problems = load_project_problems(host)
    assert [str(p) for p in problems if "relay" in str(p)] == [
        f"package {PACKAGE}: provider 'relay' has the same name as a provider of the project (rename one: models "
        "name providers without a namespace)"]


async def test_the_packed_agent_answers_through_its_packed_provider_and_its_user_endpoint_serves(
        host: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with OpenAIStub(lambda body: StubReply(text="Scouted.")) as stub:
        monkeypatch.setenv("RELAY_URL", stub.base_url)
        rt = await Runtime.open(host, database_url=f"sqlite+aiosqlite:///{tmp_path / 'host.db'}")
        try:
            result = await rt.run("scout", "Where next?")
            user = await rt.store.create_user("dora")
            _, token = await rt.store.create_api_token(user.id, "dora")
            app = create_app(rt, close_runtime=False)
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
                r = await client.get("/api/users/me/scout_status", headers={"Authorization": f"Bearer {token}"})
            tool = await rt.registry.aget("tools", "lookup", PACKAGE)
        finally:
            await rt.aclose()
    offered = [t["function"]["name"] for t in stub.requests[0]["tools"]]
    assert (result.text, offered, stub.requests[0]["model"]) == ("Scouted.", ["lookup"], "stub-model")
    assert (r.status_code, r.json()) == (200, {"scout": "ready", "user": "dora"})
    assert json.dumps(tool.declarations(), sort_keys=True) == json.dumps(DECLARED["lookup"], sort_keys=True)


def test_unpack_writes_the_packed_provider_and_user_endpoint_back_where_they_were(host: Path, tmp_path: Path) -> None:
    from standardagents.packages import unpack

    written = unpack(host / "agents" / "packed" / PACKAGE, tmp_path / "back")
    rels = sorted(str(p.relative_to(tmp_path / "back")) for p in written)
    assert rels == sorted(SCOUT)
    assert (tmp_path / "back" / "agents/providers/relay.py").read_text(encoding="utf-8") == (
        tmp_path / "scout" / "agents/providers/relay.py").read_text(encoding="utf-8")
