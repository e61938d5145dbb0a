"""MCP servers and plugin tools reach an agent through the turn loop."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine_helpers import stub_model
from standardagents import DefinitionError, define_agent, define_prompt, define_tool
from standardagents.mcp import define_mcp_server
from standardagents.testing.openai_stub import StubReply
from standardagents.toolsets import plugins

CALC = Path(__file__).parent / "mcp_servers" / "calc_server.py"
AGENT = define_agent(name="helper", side_a={"prompt": "main"})


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, str(CALC), "--http"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("PORT "), f"server did not start: {line!r}"
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


async def _run_add(stub, make_runtime, server) -> tuple[object, list[dict]]:
    stub.queue(StubReply(tool_calls=[("add", json.dumps({"a": 2, "b": 40}))]), "It is 42.")
    rt = await make_runtime(AGENT, define_prompt(name="main", prompt="x", tools=["mcp:calc"]), server, stub_model(stub))
    result = await rt.run("helper", "add 2 and 40")
    messages = await rt.store.list_messages(result.thread_id)
    return result, [m.to_dict() for m in messages]


async def test_an_mcp_server_over_stdio_gives_tools_to_an_agent(stub, make_runtime):
    server = define_mcp_server("calc", command=sys.executable, args=[str(CALC)])
    result, messages = await _run_add(stub, make_runtime, server)
    assert result.text == "It is 42."
    offered = {t["function"]["name"] for t in stub.requests[0]["tools"]}
    assert {"add", "echo"} <= offered
    tool = next(m for m in messages if m["role"] == "tool")
    assert tool["tool_status"] == "success" and "42" in tool["content"]


async def test_an_mcp_server_over_streamable_http_gives_tools_to_an_agent(stub, make_runtime, http_url):
    server = define_mcp_server("calc", url=http_url)
    _result, messages = await _run_add(stub, make_runtime, server)
    tool = next(m for m in messages if m["role"] == "tool")
    assert tool["tool_status"] == "success" and "42" in tool["content"]


async def test_a_tool_name_clash_between_origins_is_an_error_naming_both(stub, make_runtime):
    @define_tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    server = define_mcp_server("calc", command=sys.executable, args=[str(CALC)])
    rt = await make_runtime(AGENT, define_prompt(name="main", prompt="x", tools=["add", "mcp:calc"]), add, server,
                            stub_model(stub))
    with pytest.raises(DefinitionError, match=r"tool 'add' is defined twice: code.* and mcp server 'calc'"):
        await rt.run("helper", "add")


async def test_plugin_tools_registered_in_code_are_offered(stub, make_runtime):
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    plugins.register(shout, source="tests")
    try:
        stub.queue(StubReply(tool_calls=[("shout", '{"text": "hi"}')]), "done")
        rt = await make_runtime(AGENT, define_prompt(name="main", prompt="x", tools=["shout"]), stub_model(stub))
        result = await rt.run("helper", "shout")
    finally:
        plugins.unregister("shout")
    tool = next(m for m in await rt.store.list_messages(result.thread_id) if m.role == "tool")
    assert tool.content == "HI"
    assert stub.requests[0]["tools"][0]["function"]["name"] == "shout"


def test_a_prompt_naming_an_unknown_mcp_server_does_not_validate():
    from standardagents.project import build_registry

    with pytest.raises(DefinitionError, match="unknown MCP server 'nope'"):
        build_registry(AGENT, define_prompt(name="main", prompt="x", tools=["mcp:nope"]))
