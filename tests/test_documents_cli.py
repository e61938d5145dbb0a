"""``standardagents import``, ``export``, ``run DOC.json`` and ``schema agent-document``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from standardagents.cli import app
from standardagents.documents import load_document, parse_spec
from standardagents.project import load_project

ROOT = Path(__file__).resolve().parents[1]
EXECUTABLE = Path(sys.executable).parent / "standardagents"


def document() -> dict[str, Any]:
    return {
        "spec": "cubicecho.agent/1",
        "id": "code-reviewer",
        "name": "Code Reviewer",
        "description": "Reviews diffs",
        "endpoint": {"baseUrl": "http://127.0.0.1:9/v1"},
        "model": {
            "model": "qwen2.5-coder",
            "maxTokens": 2048,
            "temperature": 0.2,
            "contextLength": 32768,
            "extraBody": {"top_k": 20, "stop": ["</done>"]},
        },
        "prompt": [
            {"id": "persona", "text": "You review code."},
            {"id": "rules", "text": "Be brief.\nCite lines."},
        ],
        "retry": {"maxRetries": 3},
        "tasks": {"title": {"model": "small"}},
        "extensions": {"x.acme/color": "blue", "x.acme/limits": {"daily": 5}},
        "futureField": {"kept": [1, 2]},
    }


def write(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No real endpoint in the environment, and the working folder in the test's tmp dir."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "STANDARDAGENTS_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_import_writes_files_that_load_as_a_project(runner: CliRunner, tmp_path: Path) -> None:
    doc = write(tmp_path / "doc.json", document())
    result = runner.invoke(app, ["import", str(doc), "--into", str(tmp_path / "proj")])
    assert result.exit_code == 0, result.output
    registry = load_project(tmp_path / "proj")
    assert registry.names("agents") == ["code_reviewer"]
    assert registry.get("prompts", "code_reviewer_prompt").model == "code_reviewer_model"
    assert registry.get("models", "code_reviewer_model").api_key_env == "OPENAI_API_KEY"


def test_import_writes_document_extras_as_a_dict_constant(runner: CliRunner, tmp_path: Path) -> None:
    doc = write(tmp_path / "doc.json", document())
    runner.invoke(app, ["import", str(doc), "--into", str(tmp_path)])
    source = (tmp_path / "agents/agents/code_reviewer.py").read_text(encoding="utf-8")
    namespace: dict[str, Any] = {}
    exec(compile(source, "agent.py", "exec"), namespace)
    assert namespace["DOCUMENT_EXTRAS"]["futureField"] == document()["futureField"]
    assert namespace["DOCUMENT_EXTRAS"]["extensions"] == document()["extensions"]
    assert "#" not in source


def test_import_names_the_agent_with_name_option(runner: CliRunner, tmp_path: Path) -> None:
    doc = write(tmp_path / "doc.json", document())
    result = runner.invoke(app, ["import", str(doc), "--into", str(tmp_path), "--name", "reviewer"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "agents").rglob("*.py")) == [
        "reviewer.py", "reviewer_model.py", "reviewer_prompt.py"]


def test_import_refuses_to_overwrite_without_force(runner: CliRunner, tmp_path: Path) -> None:
    doc = write(tmp_path / "doc.json", document())
    runner.invoke(app, ["import", str(doc), "--into", str(tmp_path)])
    agent_file = tmp_path / "agents/agents/code_reviewer.py"
    agent_file.write_text("edited", encoding="utf-8")
    refused = runner.invoke(app, ["import", str(doc), "--into", str(tmp_path)])
    assert refused.exit_code == 1
    assert refused.stderr.count("already exists") == 3
    assert agent_file.read_text(encoding="utf-8") == "edited"
    forced = runner.invoke(app, ["import", str(doc), "--into", str(tmp_path), "--force"])
    assert forced.exit_code == 0
    assert "define_agent" in agent_file.read_text(encoding="utf-8")


def test_import_prints_every_problem_and_writes_nothing(runner: CliRunner, tmp_path: Path) -> None:
    doc = write(tmp_path / "bad.json", {"spec": "cubicecho.agent/9", "prompt": "x", "tasks": []})
    result = runner.invoke(app, ["import", str(doc), "--into", str(tmp_path / "proj")])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert [line.split(": ")[2] for line in lines] == ["spec", "prompt", "tasks"]
    assert not (tmp_path / "proj").exists()


def test_import_applies_layers_beneath_the_document(runner: CliRunner, tmp_path: Path) -> None:
    base = write(tmp_path / "base.json", {"spec": "cubicecho.agent/1", "tools": {"maxIterations": 4}})
    doc = write(tmp_path / "doc.json", document())
    result = runner.invoke(app, ["import", str(doc), "--layer", str(base), "--into", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "tools.maxIterations" in result.stderr


def test_round_trip_preserves_every_field_both_sides_express(runner: CliRunner, tmp_path: Path) -> None:
    original = document()
    doc = write(tmp_path / "doc.json", original)
    imported = runner.invoke(app, ["import", str(doc), "--into", str(tmp_path / "proj")])
    assert imported.exit_code == 0, imported.output
    load_project(tmp_path / "proj")
    exported = runner.invoke(app, ["export", str(tmp_path / "proj")])
    assert exported.exit_code == 0, exported.output
    back = json.loads(exported.stdout)
    parsed = parse_spec(back)
    assert parsed.errors == []
    before, after = load_document(original)[0], load_document(back)[0]
    for field in ("id", "name", "description", "model", "base_url", "max_tokens", "temperature",
                  "context_length", "max_retries", "system_prompt", "prompt", "extra_body",
                  "extensions", "tasks"):
        assert getattr(after, field) == getattr(before, field), field
    assert back["futureField"] == original["futureField"]


def test_export_writes_out_file_and_no_key(runner: CliRunner, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret")
    doc = write(tmp_path / "doc.json", document())
    runner.invoke(app, ["import", str(doc), "--into", str(tmp_path / "proj")])
    out = tmp_path / "out" / "agent.json"
    result = runner.invoke(app, ["export", str(tmp_path / "proj"), "--agent", "code_reviewer",
                                 "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    assert json.loads(text)["spec"] == "cubicecho.agent/1"
    assert "sk-host-secret" not in text
    assert "OPENAI_API_KEY" not in text


def test_export_strips_bundled_server_secrets_unless_asked(runner: CliRunner, tmp_path: Path) -> None:
    doc = write(tmp_path / "doc.json", document())
    runner.invoke(app, ["import", str(doc), "--into", str(tmp_path)])
    agent_file = tmp_path / "agents/agents/code_reviewer.py"
    bundle = {"mcpServers": [{"slug": "mem", "command": "mem-server", "env": {"TOKEN": "t0k"}}]}
    agent_file.write_text(
        agent_file.read_text(encoding="utf-8").replace(
            "DOCUMENT_EXTRAS = {", f"DOCUMENT_EXTRAS = {{'bundle': {bundle!r},", 1),
        encoding="utf-8")
    plain = runner.invoke(app, ["export", str(tmp_path)])
    kept = runner.invoke(app, ["export", str(tmp_path), "--secrets"])
    assert json.loads(plain.stdout)["bundle"]["mcpServers"] == [{"slug": "mem", "command": "mem-server"}]
    assert json.loads(kept.stdout)["bundle"] == bundle


def test_export_asks_which_agent_when_there_are_several(runner: CliRunner, tmp_path: Path) -> None:
    doc = write(tmp_path / "doc.json", document())
    runner.invoke(app, ["import", str(doc), "--into", str(tmp_path)])
    runner.invoke(app, ["import", str(doc), "--into", str(tmp_path), "--name", "second"])
    result = runner.invoke(app, ["export", str(tmp_path)])
    assert result.exit_code == 1
    assert "--agent" in result.stderr
    assert "code_reviewer" in result.stderr and "second" in result.stderr


def test_export_of_a_broken_project_prints_its_problems(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "agents/agents").mkdir(parents=True)
    (tmp_path / "agents/agents/a.py").write_text(
        "from standardagents import define_agent\nagent = define_agent(name='a', side_a={'prompt': 'missing'})\n",
        encoding="utf-8")
    result = runner.invoke(app, ["export", str(tmp_path)])
    assert result.exit_code == 1
    assert "unknown prompt 'missing'" in result.stderr


def test_run_document_on_the_offline_model(runner: CliRunner, offline: Path) -> None:
    doc = write(offline / "doc.json", {**document(), "endpoint": {}, "hooks": []})
    result = runner.invoke(app, ["run", str(doc), "hello there"])
    assert result.exit_code == 0, result.output
    assert "Test reply to: hello there" in result.stdout
    assert "default model" in result.stderr


def test_schema_agent_document_prints_a_valid_schema(runner: CliRunner) -> None:
    result = runner.invoke(app, ["schema", "agent-document"])
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(document() | {"futureField": None}, schema)


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "STANDARDAGENTS_MODEL")}
    env["COLUMNS"] = "400"
    return subprocess.run([str(EXECUTABLE), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def test_subprocess_run_of_a_document_replies_and_shows_warnings(tmp_path: Path) -> None:
    doc = write(tmp_path / "doc.json", {"spec": "cubicecho.agent/1", "id": "helper",
                                         "model": {"temperature": 7},
                                         "prompt": [{"id": "p", "text": "You help."}]})
    done = _run(["run", str(doc), "hi"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Test reply to: hi" in done.stdout
    assert f"{doc}: model.temperature: must be between 0 and 2, and was dropped" in done.stderr


def test_subprocess_run_of_a_broken_document_prints_every_problem(tmp_path: Path) -> None:
    doc = write(tmp_path / "bad.json", {"spec": "cubicecho.agent/2", "prompt": {}, "requires": [3]})
    done = _run(["run", str(doc), "hi"], tmp_path)
    assert done.returncode == 1
    for where in ("spec", "prompt", "requires[0]"):
        assert f"{doc}: {where}: " in done.stderr, where
    assert done.stdout == ""


def test_import_never_writes_bundled_server_secrets(runner: CliRunner, tmp_path: Path) -> None:
    server = {"slug": "mem", "command": "mem-server", "env": {"TOKEN": "t0k"}, "headers": {"A": "b"}}
    doc = write(tmp_path / "doc.json", {**document(), "bundle": {"mcpServers": [server]}})
    result = runner.invoke(app, ["import", str(doc), "--into", str(tmp_path)])
    assert result.exit_code == 0, result.output
    source = (tmp_path / "agents/agents/code_reviewer.py").read_text(encoding="utf-8")
    assert "t0k" not in source
    assert "'mem-server'" in source
    assert "env and headers were not written" in result.stderr


def test_import_refuses_a_document_with_nan(runner: CliRunner, tmp_path: Path) -> None:
    doc = tmp_path / "doc.json"
    doc.write_text(json.dumps(document()).replace('"blue"', "NaN"), encoding="utf-8")
    result = runner.invoke(app, ["import", str(doc), "--into", str(tmp_path / "proj")])
    assert result.exit_code == 1
    assert "NaN" in result.stderr
    assert not (tmp_path / "proj").exists()
