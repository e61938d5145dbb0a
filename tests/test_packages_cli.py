"""The pack, unpack and packages commands, run through Typer's test runner."""

from __future__ import annotations

import tomllib
from pathlib import Path

from typer.testing import CliRunner

from packages_fixtures import WRITER_FILES, copy_quickstart, write_files, write_host
from standardagents.packages.cli import packages_app

runner = CliRunner()


def test_pack_command_writes_the_package(tmp_path: Path) -> None:
    project = copy_quickstart(tmp_path / "qs")
    result = runner.invoke(packages_app, ["pack", str(project), "--agent", "assistant", "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    data = tomllib.loads((tmp_path / "out/standardagent-assistant/pyproject.toml").read_text(encoding="utf-8"))
    assert data["project"]["name"] == "standardagent-assistant"


def test_pack_command_reports_an_unknown_agent(tmp_path: Path) -> None:
    project = copy_quickstart(tmp_path / "qs")
    result = runner.invoke(packages_app, ["pack", str(project), "--agent", "nobody", "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "unknown agent 'nobody'" in result.output


def test_unpack_command_writes_project_files(tmp_path: Path) -> None:
    project = copy_quickstart(tmp_path / "qs")
    runner.invoke(packages_app, ["pack", str(project), "--agent", "assistant", "--out", str(tmp_path / "out")])
    result = runner.invoke(packages_app, ["unpack", str(tmp_path / "out/standardagent-assistant"), "--into", str(tmp_path / "fresh")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "fresh/agents/tools/calculate.py").is_file()


def test_packages_command_lists_packages_with_parent_hooks(tmp_path: Path) -> None:
    host = write_host(tmp_path / "host")
    pack_args = ["pack", str(write_files(tmp_path / "w", WRITER_FILES)), "--agent", "reviewer", "--out", str(host / "agents/packed")]
    assert runner.invoke(packages_app, pack_args).exit_code == 0
    result = runner.invoke(packages_app, ["packages", str(host)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "standardagent-reviewer" in result.output and "0.1.0" in result.output
    assert "reviewer: audit (before_parent) - records every review" in result.output


def test_validate_warns_when_a_packed_definition_reaches_a_private_runtime_surface(tmp_path: Path) -> None:
    from standardagents.packages import pack_project

    files = dict(WRITER_FILES)
    files["agents/tools/word_count.py"] = files["agents/tools/word_count.py"].replace(
        "from standardagents import define_tool", "from standardagents import define_tool\n        from standardagents.engine.runtime import Runtime")
    source = write_files(tmp_path / "writer", files)
    host = write_host(tmp_path / "host")
    pack_project(source, "writer", out_dir=host / "agents" / "packed")
    from standardagents.cli import app

    result = runner.invoke(app, ["validate", str(host)])
    assert result.exit_code == 0, result.output
    assert "warning" in result.output and "standardagents.engine" in result.output
