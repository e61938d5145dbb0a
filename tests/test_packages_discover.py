"""Discovering packed packages and registering them: lazy entries, signatures, namespaces,
packed thread endpoints, and running a packed agent beside a host project."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from packages_fixtures import WRITER_FILES, copy_quickstart, write_files, write_host
from standardagents import Runtime, ThreadEndpointDefinition, ToolDefinition
from standardagents.exceptions import DefinitionError, ProjectError
from standardagents.packages import (
    discover_packages,
    load_package_dir,
    load_packages_into,
    load_project_with_packages,
    pack_project,
    register_packages,
)
from standardagents.project import load_project, validate_project
from standardagents.registry import Registry

QS = "standardagent-assistant"
WR = "standardagent-writer"


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A host project whose agents/packed/ holds the packed quickstart and the packed writer."""
    root = write_host(tmp_path / "host")
    pack_project(copy_quickstart(tmp_path / "qs"), "assistant", out_dir=root / "agents" / "packed")
    pack_project(write_files(tmp_path / "writer", WRITER_FILES), "writer", out_dir=root / "agents" / "packed")
    return root


def _definition_modules(prefix: str) -> list[str]:
    return sorted(m for m in sys.modules if m.startswith(prefix + ".definitions."))


def test_discover_finds_local_packages_with_their_meta(host: Path) -> None:
    found = {p.package_id: p for p in discover_packages(host, installed=False)}
    assert sorted(found) == [QS, WR]
    assert (found[QS].version, found[QS].source, found[QS].entry_agents) == ("0.1.0", "local", ["assistant"])
    assert found[WR].description == "Writes short notes."


def test_discover_imports_no_definition(host: Path) -> None:
    for info in discover_packages(host, installed=False):
        assert _definition_modules(info.module_name) == []


def test_discover_reports_a_folder_that_is_not_a_package(host: Path) -> None:
    (host / "agents/packed/broken").mkdir()
    (host / "agents/packed/broken/readme.txt").write_text("nothing here", encoding="utf-8")
    problems: list = []
    found = discover_packages(host, installed=False, problems=problems)
    assert len(found) == 2
    assert [p.file for p in problems] == [str(host / "agents/packed/broken")]


def test_registered_definitions_are_lazy_until_used(host: Path) -> None:
    registry = load_project_with_packages(host, installed=False)
    entry = registry.find("tools", "calculate", QS)
    assert entry is not None and not entry.loaded
    module = registry.packages[QS].module_name + ".definitions.tools.calculate"
    assert module not in sys.modules


async def test_a_packed_tool_module_is_imported_on_first_use(host: Path) -> None:
    registry = load_project_with_packages(host, installed=False)
    module = registry.packages[QS].module_name + ".definitions.tools.calculate"
    tool = await registry.aget("tools", "calculate", QS)
    assert isinstance(tool, ToolDefinition)
    assert module in sys.modules
    assert registry.packages[QS].module_name + ".definitions.tools.current_time" not in sys.modules


async def test_loaded_definitions_carry_their_package_signature(host: Path) -> None:
    registry = load_project_with_packages(host, installed=False)
    tool = await registry.aget("tools", "calculate", QS)
    info = registry.packages[QS]
    assert tool.package == {"packageId": QS, "version": "0.1.0", "source": "local", "packedAt": info.packed_at}
    assert info.signature == tool.package


async def test_signatures_are_read_only(host: Path) -> None:
    registry = load_project_with_packages(host, installed=False)
    tool = await registry.aget("tools", "calculate", QS)
    with pytest.raises(ValidationError):
        tool.package = None
    with pytest.raises(TypeError, match="read-only"):
        tool.package["version"] = "9.9.9"
    assert tool.package["version"] == "0.1.0"


def test_the_host_own_definitions_stay_unsigned(host: Path) -> None:
    registry = load_project_with_packages(host, installed=False)
    assert registry.get("tools", "calculate").package is None


def test_only_entry_agents_are_entry_points(host: Path) -> None:
    registry = load_project_with_packages(host, installed=False)
    flags = {(e.package, e.name): e.entry_point for e in registry.all_entries("agents")}
    assert flags == {(None, "host_agent"): False, (QS, "assistant"): True, (QS, "researcher"): False,
                     (WR, "writer"): True, (WR, "reviewer"): False}


@pytest.mark.parametrize(("kind", "name", "namespace", "visible"), [
    ("tools", "host_only", None, True),            # global -> unpacked
    ("agents", "writer", None, True),              # global -> entry agent
    ("tools", "word_count", None, False),          # global -> package internals
    ("agents", "reviewer", None, False),           # global -> internal agent
    ("tools", "host_only", WR, False),             # packed -> unpacked
    ("tools", "word_count", WR, True),             # packed -> same package
    ("agents", "reviewer", WR, True),              # packed -> same package's internal agent
    ("agents", "assistant", WR, True),             # packed -> another package's entry agent
    ("tools", "current_time", WR, False),          # packed -> another package's internals
    ("prompts", "assistant_prompt", WR, False),    # packed -> another package's internals
])
def test_registered_packages_follow_the_visibility_table(host: Path, kind: str, name: str,
                                                          namespace: str | None, visible: bool) -> None:
    registry = load_project_with_packages(host, installed=False)
    assert registry.has(kind, name, namespace) is visible


def test_a_name_shared_with_the_host_resolves_to_each_sides_own(host: Path) -> None:
    registry = load_project_with_packages(host, installed=False)
    assert registry.find("tools", "calculate", None).package is None  # type: ignore[union-attr]
    assert registry.find("tools", "calculate", QS).package == QS  # type: ignore[union-attr]


def test_the_host_cannot_reference_package_internals(host: Path) -> None:
    write_files(host, {"agents/prompts/peek.py": """
        from standardagents import define_prompt

        peek = define_prompt(name="peek", prompt="Peek.", tools=["current_time"])
    """})
    with pytest.raises(ProjectError, match="unknown tool 'current_time'"):
        load_project_with_packages(host, installed=False)


def test_the_host_may_name_a_packed_entry_agent_as_a_tool(tmp_path: Path) -> None:
    root = write_host(tmp_path / "host", {"agents/prompts/delegate.py": """
        from standardagents import define_prompt

        delegate = define_prompt(name="delegate", prompt="Delegate.", tools=["reviewer"])
    """})
    with pytest.raises(ProjectError):
        load_project(root)
    pack_project(write_files(tmp_path / "w", WRITER_FILES), "reviewer", out_dir=root / "agents" / "packed")
    registry = load_project_with_packages(root, installed=False)
    assert registry.find("agents", "reviewer").package == "standardagent-reviewer"  # type: ignore[union-attr]


async def test_a_package_without_models_uses_the_hosts_default_model(host: Path) -> None:
    registry = load_project_with_packages(host, installed=False)
    assert await registry.aget("models", "default", QS) is await registry.aget("models", "default")


async def test_packed_thread_endpoints_are_registered_under_their_key(host: Path) -> None:
    registry = load_project_with_packages(host, installed=False)
    entry = registry.find("thread_endpoints", "status.get", WR)
    assert entry is not None and entry.package == WR
    endpoint = await registry.aget("thread_endpoints", "status.get", WR)
    assert isinstance(endpoint, ThreadEndpointDefinition)
    assert endpoint.package["packageId"] == WR


def test_a_packed_endpoint_key_colliding_with_a_local_one_is_a_problem(host: Path) -> None:
    write_files(host, {"agents/api/status.get.py": """
        from standardagents import define_thread_endpoint


        @define_thread_endpoint
        async def status(request):
            return {"local": True}
    """})
    problems = [p.message for p in validate_project(host)]
    assert "thread endpoint 'status.get' has the same key as a local thread endpoint (rename one: both would mount at the same path)" in problems
    with pytest.raises(ProjectError, match=r"status\.get"):
        load_project(host)
    with pytest.raises(ProjectError, match=r"status\.get"):
        load_project_with_packages(host, installed=False)


def test_two_packages_with_the_same_endpoint_key_are_a_problem(host: Path, tmp_path: Path) -> None:
    files = {k.replace("writer", "scribe"): v.replace("writer", "scribe") for k, v in WRITER_FILES.items()}
    pack_project(write_files(tmp_path / "scribe", files), "scribe", out_dir=tmp_path / "other")
    registry = Registry()
    problems = load_packages_into(registry, host, installed=False)
    problems += register_packages(registry, [load_package_dir(tmp_path / "other" / "standardagent-scribe")])
    assert [p.message for p in problems] == [
        f"thread endpoint 'status.get' has the same key as package {WR} (rename one: both would mount at the same path)"]


HANDMADE = {
    "agents/packed/handmade/__init__.py": """
        async def _agent():
            return {"sideA": {"prompt": "hand_prompt"}, "exposeAsTool": True, "toolDescription": "Hand."}


        async def _prompt():
            return {"prompt": "By hand.", "tools": ["shout"]}


        async def _tool():
            from standardagents import define_tool

            def shout(text: str = "hi") -> str:
                return text.upper()

            return define_tool(shout)


        async def _effect():
            async def run(state, args):
                return None

            return ("Send a note", None, run)


        async def _misnamed():
            return {"prompt": "x", "name": "other"}


        agents = {"hand": _agent}
        prompts = {"hand_prompt": _prompt, "misnamed": _misnamed}
        tools = {"shout": _tool}
        effects = {"note": _effect}
        __meta = {"packageId": "standardagent-hand", "version": "1.2.0", "entryAgents": ["hand"], "packedAt": 1705012800000}
    """,
}


async def test_loaders_may_return_the_specs_plain_shapes(tmp_path: Path) -> None:
    root = write_files(tmp_path / "proj", HANDMADE)
    registry = load_project_with_packages(root, installed=False)
    agent = await registry.aget("agents", "hand")
    effect = await registry.aget("effects", "note", "standardagent-hand")
    assert (agent.name, agent.expose_as_tool, agent.package["version"]) == ("hand", True, "1.2.0")
    assert (effect.name, effect.description) == ("note", "Send a note")


async def test_a_loader_returning_another_name_is_refused(tmp_path: Path) -> None:
    root = write_files(tmp_path / "proj", HANDMADE)
    registry = load_project_with_packages(root, installed=False)
    with pytest.raises(DefinitionError, match="named 'other'"):
        await registry.aget("prompts", "misnamed", "standardagent-hand")


async def test_the_packed_agent_runs_with_its_own_internals_beside_the_host(host: Path) -> None:
    registry = load_project_with_packages(host, installed=False)
    rt = await Runtime.open(registry, database_url="sqlite:///:memory:")
    try:
        result = await rt.run("assistant", "what is 2 + 2?")
        messages = await rt.store.list_messages(result.thread_id)
    finally:
        await rt.aclose()
    tool_outputs = {m.name: m.content for m in messages if m.role == "tool"}
    assert result.outcome == "response"
    assert tool_outputs["calculate"] == "2 + 2 = 4"


def test_registering_the_same_packages_again_changes_nothing(host: Path) -> None:
    registry = load_project_with_packages(host, installed=False)
    before = {(e.package, e.name) for e in registry.all_entries("tools")}
    assert load_packages_into(registry, host, installed=False) == []
    assert {(e.package, e.name) for e in registry.all_entries("tools")} == before


def test_another_package_with_a_taken_id_is_a_problem(host: Path, tmp_path: Path) -> None:
    registry = load_project_with_packages(host, installed=False)
    pack_project(copy_quickstart(tmp_path / "qs2"), "assistant", out_dir=tmp_path / "elsewhere")
    problems = register_packages(registry, [load_package_dir(tmp_path / "elsewhere" / QS)])
    assert [p.message for p in problems] == ["is found twice; the first one found is used"]
