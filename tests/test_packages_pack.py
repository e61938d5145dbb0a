"""Packing an agent: the distribution's layout, metadata, reach, versions, and unpacking."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from packages_fixtures import WRITER_FILES, copy_quickstart, write_files
from standardagents.exceptions import NotFoundError, ProjectError
from standardagents.packages import load_package_dir, pack_project, unpack, validate_packed
from standardagents.packages.unpack import read_packed_module


def _pyproject(target: Path) -> dict:
    return tomllib.loads((target / "pyproject.toml").read_text(encoding="utf-8"))


@pytest.fixture
def writer_project(tmp_path: Path) -> Path:
    return write_files(tmp_path / "proj", WRITER_FILES)


@pytest.fixture
def quickstart(tmp_path: Path) -> Path:
    return copy_quickstart(tmp_path / "qs")


def test_pack_names_the_distribution_after_the_agent(quickstart: Path, tmp_path: Path) -> None:
    target = pack_project(quickstart, "assistant", out_dir=tmp_path / "out")
    data = _pyproject(target)
    assert target.name == "standardagent-assistant"
    assert data["project"]["name"] == "standardagent-assistant"
    assert (target / "standardagent_assistant" / "__init__.py").is_file()


def test_pack_marks_the_distribution_for_discovery(quickstart: Path, tmp_path: Path) -> None:
    data = _pyproject(pack_project(quickstart, "assistant", out_dir=tmp_path / "out"))
    assert "standardagent" in data["project"]["keywords"]
    assert data["project"]["entry-points"]["standardagents"] == {"standardagent-assistant": "standardagent_assistant"}
    assert data["tool"]["standardagent"] == {"entryAgents": ["assistant"], "effects": [], "threadEndpoints": [],
                                             "userEndpoints": [], "providers": []}
    assert data["build-system"]["build-backend"] == "hatchling.build"


def test_pack_uses_the_agents_package_name_when_set(tmp_path: Path) -> None:
    files = dict(WRITER_FILES)
    files["agents/agents/writer.py"] = files["agents/agents/writer.py"].replace(
        'license="MIT",', 'license="MIT", package_name="standardagent-notes", version="2.3.4",')
    project = write_files(tmp_path / "proj", files)
    target = pack_project(project, "writer", out_dir=tmp_path / "out")
    data = _pyproject(target)
    assert (data["project"]["name"], data["project"]["version"]) == ("standardagent-notes", "2.3.4")
    assert (target / "standardagent_notes" / "__init__.py").is_file()


def test_pack_carries_author_license_and_license_file(writer_project: Path, tmp_path: Path) -> None:
    target = pack_project(writer_project, "writer", out_dir=tmp_path / "out")
    data = _pyproject(target)
    assert data["project"]["authors"] == [{"name": "Ada Writer"}]
    assert data["project"]["license"] == "MIT"
    assert "Ada Writer" in (target / "LICENSE").read_text(encoding="utf-8")
    assert "MIT License" in (target / "LICENSE").read_text(encoding="utf-8")


def test_pack_includes_everything_the_agent_reaches_and_nothing_else(writer_project: Path, tmp_path: Path) -> None:
    target = pack_project(writer_project, "writer", out_dir=tmp_path / "out")
    registries = read_packed_module(target / "standardagent_writer")["registries"]
    assert {kind: sorted(table) for kind, table in registries.items()} == {
        "agents": ["reviewer", "writer"],
        "prompts": ["house_style", "reviewer_prompt", "writer_prompt"],
        "tools": ["word_count"],
        "models": ["backup_model", "writer_model"],
        "hooks": ["audit", "stamp"],
        "effects": ["send_digest"],
        "thread_endpoints": ["status.get"],
        "user_endpoints": [],
        "providers": [],
    }


def test_pack_copies_each_source_file_unchanged(writer_project: Path, tmp_path: Path) -> None:
    target = pack_project(writer_project, "writer", out_dir=tmp_path / "out")
    copied = target / "standardagent_writer" / "definitions" / "tools" / "word_count.py"
    assert copied.read_text(encoding="utf-8") == (writer_project / "agents/tools/word_count.py").read_text(encoding="utf-8")


def test_pack_lists_effects_and_endpoints_in_the_metadata_table(writer_project: Path, tmp_path: Path) -> None:
    data = _pyproject(pack_project(writer_project, "writer", out_dir=tmp_path / "out"))
    assert data["tool"]["standardagent"]["effects"] == ["send_digest"]
    assert data["tool"]["standardagent"]["threadEndpoints"] == ["status.get"]


def test_pack_meta_describes_the_package(writer_project: Path, tmp_path: Path) -> None:
    target = pack_project(writer_project, "writer", out_dir=tmp_path / "out")
    meta = read_packed_module(target / "standardagent_writer")["__meta"]
    assert meta["packageId"] == "standardagent-writer"
    assert meta["version"] == "0.1.0"
    assert meta["entryAgents"] == ["writer"]
    assert meta["description"] == "Writes short notes."
    assert isinstance(meta["packedAt"], int) and meta["packedAt"] > 1_600_000_000_000


def test_pack_meta_discloses_parent_hooks_of_the_entry_agent(tmp_path: Path) -> None:
    project = write_files(tmp_path / "proj", WRITER_FILES)
    target = pack_project(project, "reviewer", out_dir=tmp_path / "out")
    meta = read_packed_module(target / "standardagent_reviewer")["__meta"]
    assert meta["parentHooks"] == {"reviewer": [{"hook": "audit", "reason": "records every review", "stage": "before_parent"}]}


def test_repack_bumps_the_patch_version(quickstart: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = _pyproject(pack_project(quickstart, "assistant", out_dir=out))["project"]["version"]
    second = _pyproject(pack_project(quickstart, "assistant", out_dir=out))["project"]["version"]
    third = _pyproject(pack_project(quickstart, "assistant", out_dir=out))["project"]["version"]
    assert (first, second, third) == ("0.1.0", "0.1.1", "0.1.2")


def test_repack_into_a_fresh_folder_keeps_the_declared_version(quickstart: Path, tmp_path: Path) -> None:
    pack_project(quickstart, "assistant", out_dir=tmp_path / "a")
    again = _pyproject(pack_project(quickstart, "assistant", out_dir=tmp_path / "b"))
    assert again["project"]["version"] == "0.1.0"


def test_pack_refuses_to_replace_a_folder_that_is_not_a_package(quickstart: Path, tmp_path: Path) -> None:
    (tmp_path / "out" / "standardagent-assistant").mkdir(parents=True)
    (tmp_path / "out" / "standardagent-assistant" / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ProjectError, match="not a packed agent package"):
        pack_project(quickstart, "assistant", out_dir=tmp_path / "out")
    assert (tmp_path / "out" / "standardagent-assistant" / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_pack_of_an_unknown_agent_names_the_known_ones(quickstart: Path, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="known: assistant"):
        pack_project(quickstart, "nobody", out_dir=tmp_path / "out")


def test_wheel_contains_the_module_and_entry_point(quickstart: Path, tmp_path: Path) -> None:
    import zipfile

    wheel = pack_project(quickstart, "assistant", out_dir=tmp_path / "out", wheel=True)
    names = zipfile.ZipFile(wheel).namelist()
    assert wheel.name == "standardagent_assistant-0.1.0-py3-none-any.whl"
    assert "standardagent_assistant/definitions/tools/calculate.py" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[standardagents]" in text and "standardagent_assistant" in text


def test_unpack_writes_editable_files_back_into_a_project(quickstart: Path, tmp_path: Path) -> None:
    target = pack_project(quickstart, "assistant", out_dir=tmp_path / "out")
    written = unpack(target, into=tmp_path / "fresh")
    rel = sorted(p.relative_to(tmp_path / "fresh").as_posix() for p in written)
    example = Path(__file__).parent.parent / "examples" / "quickstart"
    reached = ["agents/agents/assistant.py", "agents/agents/researcher.py", "agents/hooks/count_tool_calls.py",
               "agents/prompts/assistant_prompt.py", "agents/prompts/researcher_lead.py",
               "agents/prompts/researcher_reviewer.py", "agents/tools/calculate.py", "agents/tools/current_time.py",
               "agents/tools/deliver_findings.py", "agents/tools/report_progress.py", "agents/tools/save_notes.py"]
    assert all((example / r).is_file() for r in reached)
    assert rel == reached
    assert (tmp_path / "fresh/agents/tools/calculate.py").read_text() == (quickstart / "agents/tools/calculate.py").read_text()


def test_unpack_then_repack_is_the_same_package_at_the_next_version(quickstart: Path, tmp_path: Path) -> None:
    wheel = pack_project(quickstart, "assistant", out_dir=tmp_path / "out", wheel=True)
    unpack(wheel, into=tmp_path / "fresh")
    again = _pyproject(pack_project(tmp_path / "fresh", "assistant", out_dir=tmp_path / "out2"))
    assert (again["project"]["name"], again["project"]["version"]) == ("standardagent-assistant", "0.1.1")


def test_unpack_keeps_the_package_name_when_the_agent_is_renamed_later(tmp_path: Path) -> None:
    project = write_files(tmp_path / "proj", WRITER_FILES)
    target = pack_project(project, "writer", out_dir=tmp_path / "out")
    unpack(target, into=tmp_path / "fresh")
    agent_src = (tmp_path / "fresh/agents/agents/writer.py").read_text(encoding="utf-8")
    assert 'package_name="standardagent-writer"' in agent_src and 'version="0.1.1"' in agent_src
    assert (tmp_path / "fresh/agents/api/status.get.py").is_file()


def test_unpack_refuses_to_overwrite_different_files(quickstart: Path, tmp_path: Path) -> None:
    target = pack_project(quickstart, "assistant", out_dir=tmp_path / "out")
    host = tmp_path / "host"
    (host / "agents/tools").mkdir(parents=True)
    (host / "agents/tools/calculate.py").write_text("# mine\n", encoding="utf-8")
    with pytest.raises(ProjectError, match=r"agents/tools/calculate\.py: already exists"):
        unpack(target, into=host)
    assert (host / "agents/tools/calculate.py").read_text(encoding="utf-8") == "# mine\n"
    assert not (host / "agents/agents").exists()


def test_validate_packed_is_quiet_for_public_imports(quickstart: Path, tmp_path: Path) -> None:
    assert validate_packed(pack_project(quickstart, "assistant", out_dir=tmp_path / "out")) == []


@pytest.mark.parametrize("line", [
    "from standardagents.engine import Runtime",
    "import standardagents.store.sql",
    "from standardagents import server",
    "from standardagents import _private",
    "from standardagents.definitions._base import build",
])
def test_validate_packed_warns_about_private_runtime_surfaces(quickstart: Path, tmp_path: Path, line: str) -> None:
    tool = quickstart / "agents/tools/current_time.py"
    tool.write_text(f"if False:\n    {line}\n" + tool.read_text(encoding="utf-8"), encoding="utf-8")
    target = pack_project(quickstart, "assistant", out_dir=tmp_path / "out")
    warnings = validate_packed(load_package_dir(target))
    assert len(warnings) == 1
    assert warnings[0].startswith("standardagent-assistant/definitions/tools/current_time.py:2:")
