"""Remote A2A agents as tools (``define_a2a_agent``): a real agent turn, its model an OpenAI
stub, calls our own A2A door served by a live server, with the ``a2a-sdk`` client."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from server_fixtures import LiveServer, serve_app, write_project
from standardagents import DefinitionError, Runtime, define_a2a_agent
from standardagents.testing import OpenAIStub, StubReply
from test_doors_mcp import EXTRA

DOCS = Path(__file__).resolve().parent.parent / "docs" / "doors-a2a.md"


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[LiveServer]:
    """The remote side: a project served with its A2A door."""
    yield from serve_app(write_project(tmp_path / "remote", EXTRA), f"sqlite+aiosqlite:///{tmp_path / 'remote.db'}")


def _tool_file() -> str:
    """The docs' tool file (the example a reader copies)."""
    found = re.search(r"```python\n(# agents/tools/ask_helper\.py\n.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert found, "docs/doors-a2a.md shows agents/tools/ask_helper.py"
    return found[1]


def _local(tmp_path: Path, stub: OpenAIStub) -> Path:
    return write_project(tmp_path / "local", {
        "agents/tools/ask_helper.py": _tool_file(),
        "agents/tools/ask_guarded.py": """
            import os
            from standardagents import define_a2a_agent
            ask_guarded = define_a2a_agent("ask_guarded", url=os.environ["REMOTE_A2A_URL"].replace("helper", "guarded"),
                                           token_env="REMOTE_A2A_TOKEN")
        """,
        "agents/tools/ask_invoicer.py": """
            import os
            from standardagents import define_a2a_agent
            ask_invoicer = define_a2a_agent("ask_invoicer", url=os.environ["REMOTE_A2A_URL"].replace("helper", "invoicer"),
                                            token_env="REMOTE_A2A_TOKEN")
        """,
        "agents/agents/delegator.py": """
            from standardagents import define_agent
            delegator = define_agent(name="delegator", type="ai_human", description="Delegates.",
                                     side_a={"prompt": "delegator_prompt", "stop_on_response": True})
        """,
        "agents/prompts/delegator_prompt.py": """
            from standardagents import define_prompt
            delegator_prompt = define_prompt(name="delegator_prompt", prompt="Delegate.", model="scripted",
                                             tools=["ask_helper", "ask_guarded", "ask_invoicer"])
        """,
        "agents/models/scripted.py": f"""
            from standardagents import define_model
            scripted = define_model(name="scripted", provider="openai", model="stub-model",
                                    base_url="{stub.base_url}", max_retries=0)
        """,
    })


def _last_tool(body: dict[str, Any]) -> str | None:
    messages = body["messages"]
    return messages[-1]["content"] if messages[-1]["role"] == "tool" else None


async def test_a_turn_asks_a_remote_agent_and_gets_its_reply(remote: LiveServer, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMOTE_A2A_URL", f"{remote.base_url}/a2a/helper")
    monkeypatch.setenv("REMOTE_A2A_TOKEN", remote.token)
    with OpenAIStub() as stub:
        stub.queue(StubReply(tool_calls=[("ask_helper", '{"message": "add please"}')]), "The helper answered.")
        rt = await Runtime.open(_local(tmp_path, stub), database_url=f"sqlite+aiosqlite:///{tmp_path / 'local.db'}")
        try:
            result = await rt.run("delegator", "ask the helper")
        finally:
            await rt.aclose()
    assert result.text == "The helper answered."
    offered = {t["function"]["name"]: t["function"] for t in stub.requests[0]["tools"]}
    assert offered["ask_helper"]["parameters"]["required"] == ["message"]
    reply = _last_tool(stub.requests[1])
    assert reply is not None
    context = re.search(r"context_id='([^']+)'", reply)
    assert context, reply
    # the remote side ran a turn in the thread named by the reply's context id
    remote_messages = [m async for m in _messages(remote, context[1])]
    assert [m["content"] for m in remote_messages if m["role"] == "user"] == ["add please"]
    last = [m["content"] for m in remote_messages if m["role"] == "assistant" and m["content"]][-1]
    assert reply.startswith(last)


async def test_input_required_is_a_clear_result_and_the_answer_continues_the_task(
        remote: LiveServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMOTE_A2A_URL", f"{remote.base_url}/a2a/helper")
    monkeypatch.setenv("REMOTE_A2A_TOKEN", remote.token)

    def model(body: dict[str, Any]) -> StubReply:
        said = _last_tool(body)
        if said is None:
            return StubReply(tool_calls=[("ask_guarded", '{"message": "wipe the disk"}')])
        ids = dict(re.findall(r"(context_id|task_id)='([^']+)'", said))
        if "needs input" in said:
            return StubReply(tool_calls=[("ask_guarded", json.dumps({"message": "yes", **ids}))])
        return StubReply(text=f"Finished: {said}")

    with OpenAIStub(model) as stub:
        rt = await Runtime.open(_local(tmp_path, stub), database_url=f"sqlite+aiosqlite:///{tmp_path / 'local.db'}")
        try:
            result = await rt.run("delegator", "wipe it remotely")
        finally:
            await rt.aclose()
    asked = _last_tool(stub.requests[1])
    assert asked is not None and asked.startswith("The remote agent needs input before it can go on: waiting for "
                                                  "approval: wipe")
    assert '"approvals"' in asked  # the data part of the question, as JSON
    assert "call this tool again" in asked and "task_id=" in asked
    final = _last_tool(stub.requests[2])
    assert final is not None and "context_id=" in final
    assert result.text is not None and result.text.startswith("Finished:")
    context = re.search(r"context_id='([^']+)'", final)
    assert context
    tools = [m["content"] async for m in _messages(remote, context[1]) if m["role"] == "tool"]
    assert any("wiped" in (t or "") for t in tools)


async def test_a_typed_reply_comes_with_its_data_as_json(remote: LiveServer, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMOTE_A2A_URL", f"{remote.base_url}/a2a/helper")
    monkeypatch.setenv("REMOTE_A2A_TOKEN", remote.token)
    with OpenAIStub() as stub:
        stub.queue(StubReply(tool_calls=[("ask_invoicer", '{"message": "invoice ACME"}')]), "Invoiced.")
        rt = await Runtime.open(_local(tmp_path, stub), database_url=f"sqlite+aiosqlite:///{tmp_path / 'local.db'}")
        try:
            await rt.run("delegator", "invoice them")
        finally:
            await rt.aclose()
    reply = _last_tool(stub.requests[1])
    assert reply is not None
    data = [json.loads(line) for line in reply.splitlines() if line.startswith("{")]
    assert data and isinstance(data[0]["customer"], str) and isinstance(data[0]["total"], int)


async def test_failures_are_tool_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REMOTE_A2A_TOKEN", raising=False)
    tool = define_a2a_agent("nobody", url="http://127.0.0.1:9/a2a/x", token_env="REMOTE_A2A_TOKEN")
    missing = await tool.invoke(None, {"message": "hi"})
    assert missing.status == "error" and "REMOTE_A2A_TOKEN" in (missing.error or "")
    unreachable = await define_a2a_agent("nobody", url="http://127.0.0.1:9/a2a/x", timeout=5).invoke(None,
                                                                                                    {"message": "hi"})
    assert unreachable.status == "error" and "could not be reached" in (unreachable.error or "")
    with pytest.raises(DefinitionError) as bad:
        define_a2a_agent("Bad Name", url="ftp://x", timeout=0)
    assert {p[0] for p in bad.value.problems} == {"name", "url", "timeout"}


async def _messages(server: LiveServer, thread: str) -> Any:
    import httpx

    async with httpx.AsyncClient(base_url=server.base_url, headers=server.headers) as http:
        answer = await http.get(f"/api/threads/{thread}/messages")
    for message in answer.json()["messages"]:
        yield message
