"""Skills: folders with a SKILL.md, offered by name and description, loaded on demand.

The model is the OpenAI wire stub; what it was sent is read from ``stub.requests``. Projects
and packs are real folders; installed skills are stored in real databases (SQLite and
PostgreSQL through the ``store`` fixture).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import venv
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from packages_fixtures import write_files
from standardagents import Runtime, define_prompt
from standardagents.engine.steps import load_execution
from standardagents.exceptions import DefinitionError, NotFoundError, ProjectError
from standardagents.packages import pack_project
from standardagents.project import load_project, validate_project
from standardagents.sandbox import SandboxPool, SandboxUnavailable, deno_binary
from standardagents.sandbox.process import pyodide_dir
from standardagents.skills import load_skills, skills_of
from standardagents.store import open_store
from standardagents.testing.openai_stub import OpenAIStub, StubReply

DOCS = Path(__file__).resolve().parent.parent / "docs" / "skills.md"

PDF_SKILL = """\
---
name: pdf
description: Extract text and tables from PDF files. Use when the user mentions a PDF.
license: MIT
---
# Working with PDFs

Run scripts/extract.py with the file's path; never guess the text.
"""

CSV_SKILL = """\
---
name: csv-clean
description: Tidy CSV files (headers, delimiters, encodings).
---
Normalise the header row first.
"""

NOTES_SKILL = """\
---
name: notes
description: Keep meeting notes in the house format.
---
Start every note with the date.
"""


def _model_file(stub: OpenAIStub) -> str:
    return f"""
        from standardagents import define_model

        default = define_model(name="default", provider="openai", model="stub-model",
                               base_url="{stub.base_url}", max_retries=0)
    """


def _agent_files(stub: OpenAIStub, *, skills: str = '["*"]', tools: str = "[]", name: str = "helper") -> dict[str, str]:
    return {
        f"agents/agents/{name}.py": f"""
            from standardagents import define_agent

            {name} = define_agent(name="{name}", side_a={{"prompt": "{name}_prompt", "stop_on_response": True}})
        """,
        f"agents/prompts/{name}_prompt.py": f"""
            from standardagents import define_prompt

            {name}_prompt = define_prompt(name="{name}_prompt", prompt="You help with documents.",
                                          skills={skills}, tools={tools})
        """,
        "agents/models/default.py": _model_file(stub),
    }


def _project(root: Path, stub: OpenAIStub, skill_files: dict[str, str] | None = None, **agent: Any) -> Path:
    files = _agent_files(stub, **agent)
    files.update(skill_files if skill_files is not None else {
        "agents/skills/pdf/SKILL.md": PDF_SKILL,
        "agents/skills/pdf/scripts/extract.py": "print('extracted: ' + open('report.txt').read())\n",
        "agents/skills/csv-clean/SKILL.md": CSV_SKILL,
    })
    return write_files(root, files)


@pytest.fixture
async def open_runtime(tmp_path: Path) -> AsyncIterator[Any]:
    made: list[Runtime] = []

    async def factory(project: Path, *, store: Any = None) -> Runtime:
        rt = await Runtime.open(project, store=store or open_store(f"sqlite:///{tmp_path / f'rt{len(made)}.db'}"))
        made.append(rt)
        return rt

    yield factory
    for rt in made:
        await rt.aclose()


def _system(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


def _tool_names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or ()]


async def _tool_results(rt: Runtime, thread_id: str) -> list[Any]:
    return [m for m in await rt.store.list_messages(thread_id) if m.role == "tool"]


# on demand -----------------------------------------------------------------------------------

async def test_the_first_request_carries_names_and_descriptions_but_no_instructions(stub, open_runtime, tmp_path):
    rt = await open_runtime(_project(tmp_path / "p", stub))
    stub.queue("Hello.")
    await rt.run("helper", "hi")
    first = stub.requests[0]
    assert _system(first) == (
        "You help with documents.\n\n"
        "Skills: instructions for particular tasks, loaded on demand. When a task matches a skill, "
        "call `load_skill` with its name first and follow what it says:\n"
        "- csv-clean: Tidy CSV files (headers, delimiters, encodings).\n"
        "- pdf: Extract text and tables from PDF files. Use when the user mentions a PDF.")
    assert _tool_names(first) == ["load_skill"]
    sent = json.dumps(first)
    assert ("Working with PDFs" in sent, "Normalise the header row" in sent, "extract.py" in sent) == (False, False, False)


async def test_load_skill_returns_the_instructions_and_the_list_of_files(stub, open_runtime, tmp_path):
    rt = await open_runtime(_project(tmp_path / "p", stub))
    stub.queue(StubReply(tool_calls=[("load_skill", json.dumps({"name": "pdf"}))]), "Done.")
    result = await rt.run("helper", "read report.pdf")
    (loaded,) = await _tool_results(rt, result.thread_id)
    assert loaded.content == (
        "Skill pdf: Extract text and tables from PDF files. Use when the user mentions a PDF.\n\n"
        "# Working with PDFs\n\nRun scripts/extract.py with the file's path; never guess the text.\n\n"
        "Files of this skill (read one with load_skill and its path):\n- scripts/extract.py")
    assert stub.requests[1]["messages"][-1]["content"] == loaded.content


async def test_load_skill_with_a_path_returns_that_file(stub, open_runtime, tmp_path):
    rt = await open_runtime(_project(tmp_path / "p", stub))
    stub.queue(StubReply(tool_calls=[("load_skill", json.dumps({"name": "pdf", "path": "scripts/extract.py"}))]), "ok")
    result = await rt.run("helper", "show the script")
    (read,) = await _tool_results(rt, result.thread_id)
    assert read.content == "print('extracted: ' + open('report.txt').read())\n"


async def test_a_path_outside_the_skill_is_refused(stub, open_runtime, tmp_path):
    project = _project(tmp_path / "p", stub)
    (project / "agents" / "secret.txt").write_text("top secret", encoding="utf-8")
    rt = await open_runtime(project)
    stub.queue(StubReply(tool_calls=[("load_skill", json.dumps({"name": "pdf", "path": "../../secret.txt"}))]), "ok")
    result = await rt.run("helper", "peek")
    (row,) = await rt.store.list_tool_results(result.thread_id)
    assert (row["status"], row["error"]) == (
        "error", "Skill 'pdf' has no file '../../secret.txt'. Its files: scripts/extract.py.")


async def test_the_step_record_names_the_skill_loaded_in_that_step(stub, open_runtime, tmp_path):
    rt = await open_runtime(_project(tmp_path / "p", stub))
    stub.queue(StubReply(tool_calls=[("load_skill", json.dumps({"name": "pdf"}))]),
               StubReply(tool_calls=[("load_skill", json.dumps({"name": "pdf", "path": "scripts/extract.py"}))]),
               "Done.")
    result = await rt.run("helper", "read report.pdf")
    record = await rt.store.get_execution(result.execution_id)
    steps = (await load_execution(rt.store, record))["steps"]
    calls = [s["toolCalls"][0]["id"] if s["toolCalls"] else None for s in steps]
    assert [s["skills"] for s in steps] == [
        [{"name": "pdf", "path": None, "toolCallId": calls[0], "status": "success"}],
        [{"name": "pdf", "path": "scripts/extract.py", "toolCallId": calls[1], "status": "success"}],
        [],
    ]


async def test_a_prompt_offers_only_the_skills_it_names(stub, open_runtime, tmp_path):
    rt = await open_runtime(_project(tmp_path / "p", stub, skills='["pdf"]'))
    stub.queue(StubReply(tool_calls=[("load_skill", json.dumps({"name": "csv-clean"}))]), "ok")
    result = await rt.run("helper", "clean this csv")
    assert _system(stub.requests[0]).splitlines()[-1] == (
        "- pdf: Extract text and tables from PDF files. Use when the user mentions a PDF.")
    assert "csv-clean" not in _system(stub.requests[0])
    (refused,) = await _tool_results(rt, result.thread_id)
    assert refused.content == "Error: There is no skill 'csv-clean'. Skills you can load: pdf."


async def test_a_prompt_without_skills_gets_neither_the_tool_nor_the_list(stub, open_runtime, tmp_path):
    rt = await open_runtime(_project(tmp_path / "p", stub, skills="None"))
    stub.queue("Hello.")
    await rt.run("helper", "hi")
    assert (_system(stub.requests[0]), _tool_names(stub.requests[0])) == ("You help with documents.", [])


async def test_with_on_demand_tools_load_skill_is_in_the_tool_catalogue(stub, open_runtime, tmp_path):
    project = _project(tmp_path / "p", stub)
    prompt = project / "agents" / "prompts" / "helper_prompt.py"
    prompt.write_text(prompt.read_text().replace("tools=[])", 'tools=[], tool_discovery="ondemand")'))
    rt = await open_runtime(project)
    stub.queue(StubReply(tool_calls=[("load_tools", json.dumps({"names": ["load_skill"]}))]),
               StubReply(tool_calls=[("load_skill", json.dumps({"name": "csv-clean"}))]), "Done.")
    result = await rt.run("helper", "clean this csv")
    system = _system(stub.requests[0])
    assert [line for line in system.splitlines() if line.startswith("- ")] == [
        "- load_skill: Load a skill listed under Skills: returns its instructions and its files; give path to read one file.",
        "- csv-clean: Tidy CSV files (headers, delimiters, encodings).",
        "- pdf: Extract text and tables from PDF files. Use when the user mentions a PDF."]
    assert [_tool_names(r) for r in stub.requests] == [["load_tools"], ["load_tools", "load_skill"],
                                                      ["load_tools", "load_skill"]]
    assert (await _tool_results(rt, result.thread_id))[1].content.startswith("Skill csv-clean: ")


def test_skills_are_typed_and_checked_on_the_prompt():
    assert define_prompt(name="p", skills=["pdf", "doc-*", "*", "pdf"]).skills == ["pdf", "doc-*", "*"]
    assert define_prompt({"name": "p", "skills": ["pdf"]}).skills == ["pdf"]
    with pytest.raises(DefinitionError) as caught:
        define_prompt(name="p", skills=["pd*f"])
    assert caught.value.problems == [("skills", "'pd*f' is not a skill name, a name ending in * or *")]


# bad SKILL.md files --------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "problem"), [
    ("# PDF\nNo front matter here.\n",
     "has no front matter: it must start with a '---' block holding name and description, closed by another '---'"),
    ("---\ndescription: Extract text from PDFs.\n---\nBody.\n", "name: is missing from the front matter"),
    ("---\nname: pdf\n---\nBody.\n", "description: is missing from the front matter"),
    ("---\nname: PDF Tools\ndescription: Extract text.\n---\nBody.\n",
     "name: 'PDF Tools' must be lowercase; may hold only letters, digits and hyphens"),
    ("---\nname: pdf\ndescription: [unclosed\n---\nBody.\n",
     "its front matter is not valid YAML (line 3): did not find expected ',' or ']'"),
])
def test_a_bad_skill_md_is_one_error_naming_the_file_and_the_field(stub, tmp_path, text, problem):
    project = _project(tmp_path / "p", stub, skill_files={"agents/skills/pdf/SKILL.md": text})
    errors = [str(p) for p in validate_project(project) if not p.warning]
    assert errors == [f"agents/skills/pdf/SKILL.md: {problem}"]
    with pytest.raises(ProjectError) as caught:
        load_project(project)
    assert caught.value.problems == [("agents/skills/pdf/SKILL.md", problem)]


def test_two_skills_with_one_name_are_an_error_naming_both_files(stub, tmp_path):
    project = _project(tmp_path / "p", stub, skill_files={
        "agents/skills/documents/pdf/SKILL.md": PDF_SKILL,
        "agents/skills/reports/pdf/SKILL.md": PDF_SKILL.replace("Extract text", "Summarise"),
    })
    errors = [str(p) for p in validate_project(project) if not p.warning]
    assert errors == ["agents/skills/reports/pdf/SKILL.md: name: duplicate skill name 'pdf' "
                      "(also the name of agents/skills/documents/pdf/SKILL.md)"]


def test_a_bad_skill_stops_only_the_agents_whose_prompts_enable_skills(stub, tmp_path):
    files = {"agents/skills/pdf/SKILL.md": "no front matter\n"}
    project = _project(tmp_path / "p", stub, skill_files=files)
    write_files(project, {k: v for k, v in _agent_files(stub, skills="None", name="plain").items()
                          if not k.startswith("agents/models")})
    assert load_project(project, agent="plain").has("agents", "plain")
    with pytest.raises(ProjectError) as caught:
        load_project(project, agent="helper")
    assert [where for where, _ in caught.value.problems] == ["agents/skills/pdf/SKILL.md"]


def test_a_folder_named_unlike_its_skill_is_a_warning(stub, tmp_path):
    project = _project(tmp_path / "p", stub, skill_files={"agents/skills/pdf-tools/SKILL.md": PDF_SKILL})
    problems = validate_project(project)
    assert [(str(p), p.warning) for p in problems] == [
        ("agents/skills/pdf-tools/SKILL.md: name: 'pdf' differs from its folder's name 'pdf-tools' "
         "(the skill format asks them to match)", True)]


def test_a_prompt_naming_a_skill_the_project_lacks_is_a_warning(stub, tmp_path):
    project = _project(tmp_path / "p", stub, skills='["pdf", "slides"]')
    assert [(str(p), p.warning) for p in validate_project(project)] == [
        ("agents/prompts/helper_prompt.py: skills: no skill 'slides' in agents/skills/ (it can still be "
         "installed into a thread or for a user at run time)", True)]


def test_skills_can_be_added_to_a_registry_built_in_code(tmp_path):
    from standardagents.project import build_registry

    write_files(tmp_path / "skills", {"pdf/SKILL.md": PDF_SKILL, "broken/SKILL.md": "---\nname: broken\n---\n"})
    registry = build_registry(define_prompt(name="p", skills=["pdf"]))
    with pytest.raises(ProjectError) as caught:
        load_skills(registry, tmp_path / "skills")
    assert caught.value.problems == [(str(tmp_path / "skills" / "broken" / "SKILL.md"),
                                      "description: is missing from the front matter")]
    assert skills_of(registry).names() == []
    (tmp_path / "skills" / "broken" / "SKILL.md").unlink()
    load_skills(registry, tmp_path / "skills")
    assert skills_of(registry).names() == ["pdf"]


# from a pack ---------------------------------------------------------------------------------

async def test_a_packed_agent_offers_its_own_skills_and_not_the_hosts(stub, open_runtime, tmp_path):
    source = _project(tmp_path / "source", stub, skill_files={"agents/skills/pdf/SKILL.md": PDF_SKILL,
                                                         "agents/skills/pdf/scripts/extract.py": "print(1)\n"})
    host = _project(tmp_path / "host", stub, skill_files={"agents/skills/notes/SKILL.md": NOTES_SKILL}, name="host")
    packed = pack_project(source, "helper", out_dir=host / "agents" / "packed")
    carried = packed / "standardagent_helper" / "skills"
    assert sorted(p.relative_to(carried).as_posix() for p in carried.rglob("*") if p.is_file()) == [
        "pdf/SKILL.md", "pdf/scripts/extract.py"]
    rt = await open_runtime(host)
    stub.queue(StubReply(tool_calls=[("load_skill", json.dumps({"name": "pdf"}))]), "Done.",
               StubReply(tool_calls=[("load_skill", json.dumps({"name": "pdf"}))]), "Done.")
    packed_run = await rt.run("helper", "read report.pdf")
    host_run = await rt.run("host", "read report.pdf")
    assert [_system(stub.requests[i]).splitlines()[-1] for i in (0, 2)] == [
        "- pdf: Extract text and tables from PDF files. Use when the user mentions a PDF.",
        "- notes: Keep meeting notes in the house format."]
    (packed_load,) = await _tool_results(rt, packed_run.thread_id)
    (host_load,) = await _tool_results(rt, host_run.thread_id)
    assert packed_load.content.splitlines()[0] == (
        "Skill pdf: Extract text and tables from PDF files. Use when the user mentions a PDF.")
    assert host_load.content == "Error: There is no skill 'pdf'. Skills you can load: notes."


async def test_a_packed_skills_problem_names_the_package_file(stub, tmp_path):
    source = _project(tmp_path / "source", stub, skill_files={"agents/skills/pdf/SKILL.md": PDF_SKILL})
    host = _project(tmp_path / "host", stub, skill_files={}, name="host")
    packed = pack_project(source, "helper", out_dir=host / "agents" / "packed")
    (packed / "standardagent_helper" / "skills" / "pdf" / "SKILL.md").write_text("---\nname: pdf\n---\n", encoding="utf-8")
    assert [str(p) for p in validate_project(host) if not p.warning] == [
        "standardagent-helper/skills/pdf/SKILL.md: description: is missing from the front matter"]


def test_an_installed_packs_wheel_carries_its_skills_to_discovery(stub, tmp_path):
    source = _project(tmp_path / "source", stub, skill_files={"agents/skills/pdf/SKILL.md": PDF_SKILL,
                                                              "agents/skills/pdf/scripts/extract.py": "print(1)\n"})
    wheel = pack_project(source, "helper", out_dir=tmp_path / "out", wheel=True)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = str(env_dir / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    dev_site = sysconfig.get_paths()["purelib"]
    (Path(purelib) / "_dev_dependencies.pth").write_text(f"import site; site.addsitedir({dev_site!r})\n", encoding="utf-8")
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", "--no-index",
                    str(wheel)], capture_output=True, text=True, check=True, timeout=120)
    host = _project(tmp_path / "host", stub, skill_files={}, name="host")
    script = (
        "import json, sys\n"
        "from standardagents.project import load_project\n"
        "from standardagents.skills import skills_of\n"
        "registry = load_project(sys.argv[1])\n"
        "found = [(s.metadata.source, s.metadata.package, s.name, list(s.metadata.files), str(s.folder))\n"
        "         for s in skills_of(registry).visible('standardagent-helper')]\n"
        "print(json.dumps({'packed': found, 'host': skills_of(registry).names()}))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "STANDARDAGENTS_", "PYTHON"))}
    out = subprocess.run([python, "-c", script, str(host)], capture_output=True, text=True, check=False, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"packed": [["package", "standardagent-helper", "pdf", ["scripts/extract.py"],
                                  str(Path(purelib) / "standardagent_helper" / "skills" / "pdf")]], "host": []}


# installed at run time -----------------------------------------------------------------------

async def test_a_skill_installed_into_a_thread_is_offered_and_loaded_on_demand(stub, open_runtime, tmp_path, store):
    rt = await open_runtime(_project(tmp_path / "p", stub, skill_files={}), store=store)
    thread = await rt.create_thread("helper")
    state = await rt.state(thread.id)
    meta = await state.skills.install([{"path": "SKILL.md", "content": NOTES_SKILL},
                                       {"path": "templates/note.md", "content": "# {date}\n"}])
    assert meta.to_dict() == {"name": "notes", "description": "Keep meeting notes in the house format.",
                              "source": "thread", "files": ["templates/note.md"]}
    stub.queue(StubReply(tool_calls=[("load_skill", json.dumps({"name": "notes"}))]), "Noted.")
    await rt.send(thread.id, "take notes")
    assert _system(stub.requests[0]).splitlines()[-1] == "- notes: Keep meeting notes in the house format."
    assert "Start every note with the date" not in json.dumps(stub.requests[0])
    (loaded,) = await _tool_results(rt, thread.id)
    assert loaded.content == ("Skill notes: Keep meeting notes in the house format.\n\n"
                              "Start every note with the date.\n\n"
                              "Files of this skill (read one with load_skill and its path):\n- templates/note.md")


async def test_an_installed_skill_is_listed_read_and_removed(stub, open_runtime, tmp_path, store):
    rt = await open_runtime(_project(tmp_path / "p", stub), store=store)
    thread = await rt.create_thread("helper")
    state = await rt.state(thread.id)
    await state.skills.install({"SKILL.md": NOTES_SKILL, "logo.png": b"\x89PNG\x00\x01"})
    again = await rt.state(thread.id)
    assert [(m.name, m.source) for m in await again.skills.list()] == [
        ("csv-clean", "project"), ("notes", "thread"), ("pdf", "project")]
    assert await again.skills.read("notes") == "Start every note with the date."
    assert await again.skills.read_file("notes", "logo.png") == b"\x89PNG\x00\x01"
    assert await again.skills.remove("notes") is True
    assert [m.name for m in await again.skills.list()] == ["csv-clean", "pdf"]
    with pytest.raises(NotFoundError):
        await (await rt.state(thread.id)).skills.read("notes")


async def test_a_skill_installed_for_a_user_reaches_that_users_threads_only(stub, open_runtime, tmp_path, store):
    rt = await open_runtime(_project(tmp_path / "p", stub, skill_files={}), store=store)
    ada = await rt.store.create_user("ada")
    bob = await rt.store.create_user("bob")
    first = await rt.create_thread("helper", user_id=ada.id)
    await (await rt.state(first.id)).skills.install({"SKILL.md": NOTES_SKILL}, scope="user")
    second = await rt.create_thread("helper", user_id=ada.id)
    other = await rt.create_thread("helper", user_id=bob.id)
    assert [m.source for m in await (await rt.state(second.id)).skills.list()] == ["user"]
    assert await (await rt.state(other.id)).skills.list() == []


async def test_a_name_the_project_defines_is_its_skill_whatever_a_user_installed(stub, open_runtime, tmp_path):
    source = _project(tmp_path / "source", stub, skill_files={})
    host = _project(tmp_path / "host", stub, skill_files={"agents/skills/notes/SKILL.md": NOTES_SKILL}, name="host")
    pack_project(source, "helper", out_dir=host / "agents" / "packed")
    rt = await open_runtime(host)
    ada = await rt.store.create_user("ada")
    packed_thread = await rt.create_thread("helper", user_id=ada.id)
    theirs = NOTES_SKILL.replace("Keep meeting notes in the house format.", "Notes, the package's way.")
    await (await rt.state(packed_thread.id)).skills.install({"SKILL.md": theirs}, scope="user")
    host_state = await rt.state((await rt.create_thread("host", user_id=ada.id)).id)
    assert [(m.name, m.source, m.description) for m in await host_state.skills.list()] == [
        ("notes", "project", "Keep meeting notes in the house format.")]
    assert await host_state.skills.read("notes") == "Start every note with the date."


@pytest.mark.parametrize(("files", "problems"), [
    ({"SKILL.md": "no front matter"},
     [("SKILL.md", "has no front matter: it must start with a '---' block holding name and description, "
                   "closed by another '---'")]),
    ({"SKILL.md": "---\ndescription: d\n---\n"}, [("SKILL.md: name", "is missing from the front matter")]),
    ({"SKILL.md": "---\nname: notes\n---\n"}, [("SKILL.md: description", "is missing from the front matter")]),
    ({"README.md": "hi"}, [("files", "there is no SKILL.md (the file with the skill's name and description)")]),
    ([{"path": "../SKILL.md", "content": NOTES_SKILL}],
     [("files[0].path", "'../SKILL.md' is not a relative path inside the skill's folder")]),
])
async def test_a_bad_install_names_the_file_and_field_and_stores_nothing(stub, open_runtime, tmp_path, files, problems):
    rt = await open_runtime(_project(tmp_path / "p", stub, skill_files={}))
    thread = await rt.create_thread("helper")
    state = await rt.state(thread.id)
    with pytest.raises(DefinitionError) as caught:
        await state.skills.install(files)
    assert caught.value.problems == problems
    assert await rt.store.list_env("thread", thread.id) == {}


async def test_installing_a_name_the_project_uses_is_refused(stub, open_runtime, tmp_path):
    rt = await open_runtime(_project(tmp_path / "p", stub))
    state = await rt.state((await rt.create_thread("helper")).id)
    with pytest.raises(DefinitionError) as caught:
        await state.skills.install({"SKILL.md": PDF_SKILL})
    assert caught.value.problems == [("SKILL.md: name", "'pdf' is already the name of a skill of the project")]


async def test_installing_again_replaces_only_when_asked(stub, open_runtime, tmp_path):
    rt = await open_runtime(_project(tmp_path / "p", stub, skill_files={}))
    state = await rt.state((await rt.create_thread("helper")).id)
    await state.skills.install({"SKILL.md": NOTES_SKILL})
    newer = NOTES_SKILL.replace("Start every note", "Open every note")
    with pytest.raises(DefinitionError) as caught:
        await state.skills.install({"SKILL.md": newer})
    assert caught.value.problems == [
        ("SKILL.md: name", "'notes' is already installed for the thread (pass replace=True to replace it)")]
    await state.skills.install({"SKILL.md": newer}, replace=True)
    assert await state.skills.read("notes") == "Open every note with the date."


# run_code ------------------------------------------------------------------------------------

def _sandbox_problem() -> str | None:
    try:
        deno_binary()
    except SandboxUnavailable as exc:
        return str(exc)
    if not (pyodide_dir() / "pyodide.asm.wasm").exists():
        return f"Pyodide is not cached in {pyodide_dir()} (run: python -m standardagents.sandbox warm)"
    return None


@pytest_asyncio.fixture
async def pool() -> AsyncIterator[SandboxPool]:
    problem = _sandbox_problem()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the sandbox is unavailable under CI: {problem}")
        pytest.skip(problem)
    sandbox = SandboxPool(size=1)
    yield sandbox
    await sandbox.close()


async def test_a_loaded_skills_script_runs_in_the_run_code_sandbox(stub, open_runtime, tmp_path, pool):
    rt = await open_runtime(_project(tmp_path / "p", stub, tools='["run_code"]'))
    rt.sandbox_pool = pool
    try:
        thread = await rt.create_thread("helper")
        await (await rt.state(thread.id)).write_file("report.txt", "Q3 revenue up")
        code = "exec(open('skills/pdf/scripts/extract.py').read())"
        stub.queue(StubReply(tool_calls=[("load_skill", json.dumps({"name": "pdf"}))]),
                   StubReply(tool_calls=[("run_code", json.dumps({"code": code}))]), "Done.")
        await rt.send(thread.id, "read report.pdf")
        loaded, ran = await _tool_results(rt, thread.id)
        assert loaded.content.endswith("Its files are in the run_code workspace under skills/pdf/ "
                                       "(run its scripts only with run_code).")
        assert json.loads(ran.content)["stdout"] == "extracted: Q3 revenue up"
        assert sorted(f.path for f in await rt.store.list_files(thread.id)) == [
            "/report.txt", "/skills/pdf/scripts/extract.py"]
    finally:
        rt.sandbox_pool = None


# docs ----------------------------------------------------------------------------------------

async def test_the_docs_example_runs(stub, tmp_path):
    text = DOCS.read_text(encoding="utf-8")
    files = dict(re.findall(r"```(?:markdown|python)\n# (agents/\S+)\n(.*?)```", text, re.S))
    files["agents/models/default.py"] = _model_file(stub)
    project = write_files(tmp_path / "docs-project", files)
    example = re.search(r"```python\n(# run it\n.*?)```", text, re.S)
    assert example is not None
    stub.queue(StubReply(tool_calls=[("load_skill", json.dumps({"name": "release-notes"}))]), "Here are the notes.")
    scope: dict[str, Any] = {}
    exec(compile(example.group(1), str(DOCS), "exec"), scope)
    result = await scope["main"](project, f"sqlite:///{tmp_path / 'docs.db'}")
    assert result.text == "Here are the notes."
    assert _system(stub.requests[0]).splitlines()[-2:] == [
        "- house-style: How this team words its messages.",
        "- release-notes: Write release notes from a list of merged changes."]
