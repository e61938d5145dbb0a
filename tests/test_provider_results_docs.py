"""The worked example of docs/providers.md ("What the provider ran itself"), run against a
turn through the Gemini HTTP stub whose reply was grounded in two web pages."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from standardagents import Runtime, define_agent, define_model, define_prompt
from standardagents.project import build_registry
from standardagents.testing.gemini_stub import GeminiReply, GeminiStub

DOCS = Path(__file__).resolve().parents[1] / "docs" / "providers.md"
KEY = "g-test-key-42"


def docs_block(first_line: str) -> str:
    found = re.search(r"```python\n(" + re.escape(first_line) + r"\n.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert found, f"docs/providers.md shows {first_line}"
    return found[1]


@pytest.fixture
def gemini_stub() -> Iterator[GeminiStub]:
    with GeminiStub(api_key=KEY) as server:
        yield server


async def test_the_documented_example_lists_the_pages_a_reply_was_grounded_in(
        gemini_stub: GeminiStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    gemini_stub.queue(GeminiReply(text="Found them.", grounding={"groundingChunks": [
        {"web": {"uri": "https://example.org/a", "title": "A"}},
        {"web": {"uri": "https://example.org/b", "title": "B"}}]}))
    namespace: dict[str, Any] = {}
    exec(compile(docs_block("# pages_found.py"), "pages_found.py", "exec"), namespace)
    registry = build_registry(
        define_agent(name="finder", side_a={"prompt": "finder", "stop_on_response": True}),
        define_prompt(name="finder", prompt="Search.", model="flash"),
        define_model(name="flash", provider="gemini", model="gemini-2.5-flash", base_url=gemini_stub.base_url,
                     max_retries=0))
    rt = await Runtime.open(registry, database_url=f"sqlite+aiosqlite:///{tmp_path / 'rt.db'}")
    try:
        result = await rt.run("finder", "Find the example pages.")
        pages = await namespace["pages_found"](rt, result.thread_id)
    finally:
        await rt.aclose()
    assert pages == ["https://example.org/a", "https://example.org/b"]
