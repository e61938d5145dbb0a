"""``standardagents memory``: put, search, get, delete, export and import as JSON Lines, bad
input, re-embedding and forgetting a user, on a project's SQLite database (in-process through
Typer's runner, and once as a real subprocess)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from standardagents.cli import app
from standardagents.store import SQLStore

runner = CliRunner()


def _memory(project: Path, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["memory", *args, "--project", str(project)])
    return result.exit_code, result.stdout, result.stderr


def _seed(project: Path) -> None:
    for key, text in (("dog", "My dog is called Rex"), ("car", "I drive a green Volvo"), ("food", "I love ramen")):
        assert _memory(project, "put", "user.u1.facts", key, json.dumps({"text": text}))[0] == 0


def test_put_then_search_by_meaning_ranks_the_relevant_item_first(tmp_path: Path) -> None:
    _seed(tmp_path)
    code, out, _ = _memory(tmp_path, "search", "user.u1", "--query", "what is my dog called", "--json", "--limit", "1")
    assert code == 0
    assert [json.loads(line)["key"] for line in out.splitlines()] == ["dog"]


def test_get_prints_the_item_and_delete_makes_it_gone(tmp_path: Path) -> None:
    _seed(tmp_path)
    code, out, _ = _memory(tmp_path, "get", "user.u1.facts", "car")
    assert code == 0 and json.loads(out)["value"] == {"text": "I drive a green Volvo"}
    assert _memory(tmp_path, "delete", "user.u1.facts", "car")[:2] == (0, "deleted user.u1.facts car\n")
    code, _, err = _memory(tmp_path, "get", "user.u1.facts", "car")
    assert (code, err) == (1, "error: no item 'car' in user.u1.facts\n")


def test_a_value_that_is_not_an_object_is_one_error_line(tmp_path: Path) -> None:
    code, _, err = _memory(tmp_path, "put", "user.u1.facts", "k", "[1, 2]")
    assert (code, err) == (1, "error: value must be a JSON object, not list\n")


def test_export_then_import_into_another_project_copies_every_item(tmp_path: Path) -> None:
    source, target = tmp_path / "a", tmp_path / "b"
    source.mkdir()
    target.mkdir()
    _seed(source)
    dump = tmp_path / "dump.jsonl"
    assert _memory(source, "export", "--output", str(dump))[0] == 0
    assert len(dump.read_text().splitlines()) == 3
    assert _memory(target, "import", str(dump))[:2] == (0, "imported 3 items\n")
    _, out, _ = _memory(target, "search", "user.u1", "--query", "ramen", "--json", "--limit", "1")
    assert [json.loads(line)["value"] for line in out.splitlines()] == [{"text": "I love ramen"}]


def test_an_import_with_a_bad_line_writes_nothing(tmp_path: Path) -> None:
    dump = tmp_path / "bad.jsonl"
    dump.write_text(json.dumps({"namespace": ["n"], "key": "ok", "value": {"a": 1}}) + "\n"
                    + json.dumps({"namespace": "n", "key": "bad", "value": {}}) + "\n")
    code, _, err = _memory(tmp_path, "import", str(dump))
    assert code == 1 and err.startswith("error: line 2: namespace must be a list of strings")
    assert _memory(tmp_path, "search", "", "--json")[1] == ""


def test_reembed_moves_items_to_a_new_embedder(tmp_path: Path) -> None:
    _seed(tmp_path)
    bigger = json.dumps({"provider": "offline", "dimensions": 64})
    assert _memory(tmp_path, "search", "user.u1", "--query", "dog", "--embedder", bigger)[1] == ""
    assert _memory(tmp_path, "reembed", "--embedder", bigger)[:2] == (0, "re-embedded 3 items\n")
    _, out, _ = _memory(tmp_path, "search", "user.u1", "--query", "dog", "--embedder", bigger, "--json", "--limit", "1")
    assert [json.loads(line)["key"] for line in out.splitlines()] == ["dog"]


def test_forget_user_as_a_subprocess_removes_their_memory_and_reports_it(tmp_path: Path) -> None:
    _seed(tmp_path)
    assert _memory(tmp_path, "put", "user.u2.facts", "k", json.dumps({"text": "other"}))[0] == 0
    done = subprocess.run([str(Path(sys.executable).parent / "standardagents"), "memory", "forget-user", "u1", "--project",
                           str(tmp_path)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["userId"], report["removed"]) == ("u1", {"memory_items": 3, "memory_vectors": 3})

    async def left() -> list[tuple[str, ...]]:
        store = SQLStore(f"sqlite:///{tmp_path / '.standardagents' / 'standardagents.db'}")
        rows = await store._run(lambda c: [tuple(r) for r in c.exec_driver_sql("SELECT namespace, key FROM memory_items")],
                                write=False)
        await store.close()
        return rows

    assert asyncio.run(left()) == [("user.u2.facts", "k")]
