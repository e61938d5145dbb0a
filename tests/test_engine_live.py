"""Tool lists are live: a changed project file or an MCP server's changed list is seen by the
next step."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from engine_helpers import stub_model
from standardagents import Runtime, define_agent, define_prompt
from standardagents.mcp import define_mcp_server
from standardagents.store import open_store
from standardagents.testing.openai_stub import StubReply

CALC = Path(__file__).parent / "mcp_servers" / "calc_server.py"


def _project(root: Path, prompt_text: str) -> Path:
    files = {
        "agents/agents/helper.py": "from standardagents import define_agent\n"
                                   "helper = define_agent(name='helper', side_a={'prompt': 'helper_prompt'})\n",
        "agents/prompts/helper_prompt.py": "from standardagents import define_prompt\n"
                                           f"helper_prompt = define_prompt(name='helper_prompt', prompt={prompt_text!r})\n",
        "agents/models/default.py": "from standardagents import define_model\n"
                                    "default = define_model(name='default', provider='openai', model='m', "
                                    "base_url=__import__('os').environ['STUB_URL'], stream=False, max_retries=0)\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


async def test_a_reloaded_project_is_used_from_the_next_turn(stub, tmp_path, monkeypatch):
    monkeypatch.setenv("STUB_URL", stub.base_url)
    root = _project(tmp_path / "proj", "Version one.")
    rt = await Runtime.open(root, store=open_store(f"sqlite:///{tmp_path / 'r.db'}"))
    try:
        stub.queue("a", "b", "c")
        thread = await rt.create_thread("helper")
        await rt.send(thread.id, "hi")
        _project(root, "Version two.")
        assert rt.reload_project() == []
        await rt.send(thread.id, "again")
        assert [r["messages"][0]["content"] for r in stub.requests] == ["Version one.", "Version two."]
        (root / "agents/prompts/helper_prompt.py").write_text("this is not python(")
        problems = rt.reload_project()
        assert problems and "helper_prompt.py" in problems[0]
        await rt.send(thread.id, "still works")
        assert stub.requests[-1]["messages"][0]["content"] == "Version two."
    finally:
        await rt.aclose()


async def test_the_watcher_reloads_when_a_file_changes(stub, tmp_path, monkeypatch):
    monkeypatch.setenv("STUB_URL", stub.base_url)
    root = _project(tmp_path / "proj", "Before.")
    rt = await Runtime.open(root, store=open_store(f"sqlite:///{tmp_path / 'w.db'}"))
    watcher = asyncio.get_running_loop().create_task(rt.watch_project(debounce_ms=50))
    sub = rt.subscribe(None)
    try:
        await asyncio.sleep(0)  # let the watcher start before the change
        for _ in range(50):  # the watcher may need a moment to arm: touch until it reports
            _project(root, "After.")
            try:
                event = await sub.get(timeout=0.5)
            except TimeoutError:
                continue
            if event.type == "project_reloaded":
                break
        else:
            raise AssertionError("the project was not reloaded")
        stub.queue("ok")
        await rt.run("helper", "hi")
        assert stub.requests[-1]["messages"][0]["content"] == "After."
    finally:
        watcher.cancel()
        sub.close()
        await rt.aclose()


async def test_an_mcp_servers_changed_tool_list_is_offered_at_the_next_step(stub, make_runtime):
    server = define_mcp_server("calc", command=sys.executable, args=[str(CALC)])
    stub.queue(StubReply(tool_calls=[("grow", "{}")]), StubReply(tool_calls=[("shout", '{"text": "hi"}')]), "done")
    rt = await make_runtime(define_agent(name="helper", side_a={"prompt": "main"}),
                            define_prompt(name="main", prompt="x", tools=["mcp:calc"]), server, stub_model(stub))
    result = await rt.run("helper", "grow, then shout")
    first = {t["function"]["name"] for t in stub.requests[0]["tools"]}
    second = {t["function"]["name"] for t in stub.requests[1]["tools"]}
    assert "shout" not in first and "shout" in second
    tools = [m for m in await rt.store.list_messages(result.thread_id) if m.role == "tool"]
    assert tools[-1].tool_status == "success" and "HI" in tools[-1].content.upper()


async def test_the_watcher_loads_the_changed_project_off_the_event_loop(stub, tmp_path, monkeypatch):
    import threading
    import types

    monkeypatch.setenv("STUB_URL", stub.base_url)
    root = _project(tmp_path / "proj", "Before.")
    rt = await Runtime.open(root, store=open_store(f"sqlite:///{tmp_path / 'w.db'}"))
    # a project file whose import waits until the event loop answers: it only finishes in
    # time when the loading runs beside the loop, not on it
    gate = types.SimpleNamespace(entered=threading.Event(), release=threading.Event(), answered=None)
    monkeypatch.setitem(sys.modules, "reload_gate_probe", gate)
    watcher = asyncio.get_running_loop().create_task(rt.watch_project(debounce_ms=50))
    sub = rt.subscribe(None)
    try:
        await asyncio.sleep(0)
        slow = ("import reload_gate_probe as gate\n"
                "gate.entered.set()\n"
                "gate.answered = gate.release.wait(5)\n")
        for _ in range(50):  # the watcher may need a moment to arm: touch until it loads
            (root / "agents/tools").mkdir(parents=True, exist_ok=True)
            (root / "agents/tools/slow.py").write_text(slow)
            if await asyncio.to_thread(gate.entered.wait, 0.5):
                break
        else:
            raise AssertionError("the project was not reloaded")
        gate.release.set()  # runs only if the loop is free while the project loads
        while (await sub.get(timeout=10)).type != "project_reloaded":
            pass
        assert gate.answered is True
    finally:
        watcher.cancel()
        sub.close()
        await rt.aclose()
