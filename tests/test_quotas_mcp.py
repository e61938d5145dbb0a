"""Quotas at the MCP door: a call whose turn is over its user's quota is a tool error
(``isError``) saying which quota was met and when to retry, through the real ``mcp`` client."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

from server_fixtures import LiveServer
from standardagents.testing import OpenAIStub
from test_quotas_doors import _serve, _user_token, stub

__all__ = ["stub"]  # the model stub fixture of the quota doors tests


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


async def test_an_mcp_call_over_the_quota_is_a_tool_error_naming_the_quota_and_the_retry(
        per_minute: LiveServer, tmp_path: Path) -> None:
    for _attempt in range(3):  # both calls within one minute, so the second meets the limit
        token = await _user_token(tmp_path)
        minute = time.time() // 60
        first, second = await _two_calls(per_minute, token)
        if time.time() // 60 == minute:
            break
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
