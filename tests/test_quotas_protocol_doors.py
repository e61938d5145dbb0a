"""Quotas at the protocol doors, each through its real client: a turn over its user's quota
is an MCP tool error (``isError``), a rejected A2A task and an AG-UI run ending in RUN_ERROR,
each saying which quota was met and when to retry."""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import httpx
import httpx2
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import get_data_parts, new_text_part
from a2a.types import GetTaskRequest, Message, Role, SendMessageRequest, TaskState
from ag_ui.core import EventType
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

from server_fixtures import LiveServer
from standardagents.testing import OpenAIStub
from test_doors_agui import _input, parse_run
from test_quotas_doors import _serve, _user_token, stub

__all__ = ["stub"]  # the model stub fixture of the quota doors tests

T = TypeVar("T")


@pytest.fixture
def per_minute(tmp_path: Path, stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveServer]:
    yield from _serve(tmp_path, stub, monkeypatch, {"turnsPerMinute": 1})


async def _two_calls(server: LiveServer, token: str) -> tuple[types.CallToolResult, types.CallToolResult]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(30.0, read=60.0)) as http:
        async with Client(streamable_http_client(f"{server.base_url}/mcp", http_client=http)) as client:
            first = await client.call_tool("helper", {"message": "hi"})
            second = await client.call_tool("helper", {"message": "again"})
    return first, second


async def _within_a_minute(tmp_path: Path, server: LiveServer,
                               two_turns: Callable[[LiveServer, str], Awaitable[T]]) -> T:
    """Two turns of a new user inside one clock minute, so the second meets turnsPerMinute."""
    for _attempt in range(3):
        token = await _user_token(tmp_path)
        minute = time.time() // 60
        both = await two_turns(server, token)
        if time.time() // 60 == minute:
            break
    return both


async def test_an_mcp_call_over_the_quota_is_a_tool_error_naming_the_quota_and_the_retry(
        per_minute: LiveServer, tmp_path: Path) -> None:
    first, second = await _within_a_minute(tmp_path, per_minute, _two_calls)
    assert not first.is_error
    assert second.is_error
    text = second.content[0].text  # type: ignore[union-attr]
    structured = second.structured_content or {}
    assert structured["code"] == "quota_exceeded"
    assert 1 <= structured["retryAfter"] <= 60
    assert text == structured["error"]
    assert text.startswith("quota exceeded: user:")
    assert "has started 1 turns this minute, the limit of turnsPerMinute" in text
    assert text.endswith(f"nothing was run, retry in {structured['retryAfter']} second"
                         f"{'s' if structured['retryAfter'] != 1 else ''}")


def _message(text: str) -> SendMessageRequest:
    return SendMessageRequest(message=Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER,
                                              parts=[new_text_part(text)]))


async def _two_tasks(server: LiveServer, token: str) -> tuple[object, object]:
    finals = []
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        client = await create_client(f"{server.base_url}/a2a/helper/jsonrpc",
                                     client_config=ClientConfig(httpx_client=http, streaming=False))
        try:
            for text in ("hi", "again"):
                seen = [response async for response in client.send_message(_message(text))]
                tasks = [r.task for r in seen if r.HasField("task")]
                assert tasks, seen
                finals.append(await client.get_task(GetTaskRequest(id=tasks[-1].id)))
        finally:
            await client.close()
    return finals[0], finals[1]


async def test_an_a2a_task_over_the_quota_is_rejected_naming_the_quota_and_the_retry(
        per_minute: LiveServer, tmp_path: Path) -> None:
    first, second = await _within_a_minute(tmp_path, per_minute, _two_tasks)
    assert first.status.state == TaskState.TASK_STATE_COMPLETED  # type: ignore[attr-defined]
    assert second.status.state == TaskState.TASK_STATE_REJECTED  # type: ignore[attr-defined]
    parts = list(second.status.message.parts)  # type: ignore[attr-defined]
    [data] = get_data_parts(parts)
    assert data["code"] == "quota_exceeded"
    retry = int(data["retryAfter"])
    assert 1 <= retry <= 60
    assert parts[0].text.startswith("quota exceeded: user:")
    assert "has started 1 turns this minute, the limit of turnsPerMinute" in parts[0].text
    assert parts[0].text.endswith(f"nothing was run, retry in {retry} second{'s' if retry != 1 else ''}")


async def _two_runs(server: LiveServer, token: str) -> tuple[httpx.Response, httpx.Response]:
    async with httpx.AsyncClient(base_url=server.base_url, headers={"Authorization": f"Bearer {token}"},
                                 timeout=60) as http:
        first = await http.post("/ag-ui/helper", json=_input(f"t-{uuid.uuid4().hex}", "hi"))
        second = await http.post("/ag-ui/helper", json=_input(f"t-{uuid.uuid4().hex}", "again"))
    return first, second


async def test_an_agui_run_over_the_quota_ends_in_run_error_naming_the_quota_and_the_retry(
        per_minute: LiveServer, tmp_path: Path) -> None:
    first, second = await _within_a_minute(tmp_path, per_minute, _two_runs)
    assert parse_run(first.text)[-1].type == EventType.RUN_FINISHED
    assert second.status_code == 200
    events = parse_run(second.text)
    assert [e.type for e in events] == [EventType.RUN_STARTED, EventType.RUN_ERROR]
    error = events[-1]
    retry = int(second.headers["retry-after"])
    assert error.code == "quota_exceeded"
    assert error.metadata["retryAfter"] == retry and 1 <= retry <= 60
    assert error.message.startswith("quota exceeded: user:")
    assert "has started 1 turns this minute, the limit of turnsPerMinute" in error.message
    assert error.message.endswith(f"nothing was run, retry in {retry} second{'s' if retry != 1 else ''}")
