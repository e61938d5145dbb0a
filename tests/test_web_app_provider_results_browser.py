"""What a provider ran itself, in headless Chromium: a Gemini reply grounded in a web search
and carrying a generated image and a run of code keeps them on the stored message (the
messages API) and shows them under the reply (links, the image, a collapsed card), live and
after a reload; a hostile page title or output stays text and a ``javascript:`` link is
dropped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from test_server_browser import chromium
from test_web_app_browser import _project, _turn, browser

__all__ = ["browser", "chromium"]

pytestmark = pytest.mark.browser

KEY = "g-test-key-42"
#: a 2x2 red PNG
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR4nGP4z8AARAwQCgAf7gP9i18U1AAAAABJRU5ErkJggg=="
HOSTILE = '<img src=x onerror="window.__pwned = 1">'
CHUNKS = [{"web": {"uri": "https://example.org/guide", "title": "The guide"}},
          {"web": {"uri": "https://news.example.com/a?b=1", "title": HOSTILE}},
          {"web": {"uri": "javascript:window.__pwned = 2", "title": "Click me"}}]

EXTRA = {
    "agents/agents/searcher.py": "from standardagents import define_agent\n"
                                 "searcher = define_agent(name='searcher', side_a={'prompt': 'searcher_prompt',\n"
                                 "                                                 'stop_on_response': True})\n",
    "agents/prompts/searcher_prompt.py": "from standardagents import define_prompt\n"
                                         "searcher_prompt = define_prompt(name='searcher_prompt', prompt='Search.',\n"
                                         "                                model='flash')\n",
}


@pytest.fixture
def app_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from server_fixtures import serve_app
    from standardagents.testing.gemini_stub import GeminiReply, GeminiStub
    from standardagents.testing.openai_stub import OpenAIStub

    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    reply = GeminiReply(text="Here is what I found.", chunk_size=6,
                        parts=[{"inlineData": {"mimeType": "image/png", "data": PNG}},
                               {"executableCode": {"language": "PYTHON", "code": "print(6 * 7)"}},
                               {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": HOSTILE}}],
                        grounding={"groundingChunks": CHUNKS})
    with OpenAIStub() as openai, GeminiStub(lambda body: reply, api_key=KEY) as gemini:
        project = _project(tmp_path / "webapp", openai.base_url)
        files = dict(EXTRA)
        files["agents/models/flash.py"] = ("from standardagents import define_model\n"
                                           "flash = define_model(name='flash', provider='gemini', model='gemini-2.5-flash',\n"
                                           f"                     base_url={gemini.base_url!r}, max_retries=0)\n")
        for rel, text in files.items():
            (project / rel).write_text(text)
        yield from serve_app(project, f"sqlite+aiosqlite:///{project / 'app.db'}", dev=True)


async def _stored_results(base_url: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=base_url) as api:
        thread_id = (await api.get("/api/threads")).json()["threads"][0]["id"]
        messages = (await api.get(f"/api/threads/{thread_id}/messages")).json()["messages"]
    (reply,) = [m for m in messages if m["role"] == "assistant"]
    results: list[dict[str, Any]] = reply["metadata"]["providerResults"]
    return results


async def _assert_shown(page: Any) -> None:
    from playwright.async_api import expect

    box = page.locator(".msg.assistant .provider-results")
    links = box.locator(".provider-links a")
    await expect(links).to_have_text(["The guide", HOSTILE])
    assert [await a.get_attribute("href") for a in await links.all()] == [
        "https://example.org/guide", "https://news.example.com/a?b=1"]
    assert {(await a.get_attribute("target"), await a.get_attribute("rel")) for a in await links.all()} == {
        ("_blank", "noopener noreferrer")}
    await expect(box.locator(".provider-host")).to_have_text(["example.org", "news.example.com"])
    image = box.locator("img.provider-image")
    await expect(image).to_have_attribute("src", f"data:image/png;base64,{PNG}")
    handle = await image.element_handle()
    await page.wait_for_function("e => e.complete", arg=handle, timeout=5_000)
    assert await image.evaluate("e => [e.naturalWidth, e.naturalHeight]") == [2, 2]
    assert await page.locator(".provider-results img").count() == 1
    card = box.locator("details.provider-tool")
    await expect(card.locator("summary")).to_have_text("code_execution (ran by the provider)")
    await expect(card.locator(".provider-tool-output")).to_be_hidden()
    await card.locator("summary").click()
    await expect(card.locator(".provider-tool-input")).to_have_text("print(6 * 7)")
    await expect(card.locator(".provider-tool-output")).to_have_text(HOSTILE)
    assert await page.locator("a[href^='javascript']").count() == 0
    assert await page.evaluate("() => window.__pwned") is None


async def test_a_reply_keeps_its_search_results_and_image_on_the_stored_message(
        browser: Any, app_server: Any) -> None:
    page = await browser.new_page()
    await page.goto(app_server.base_url + "/")
    await _turn(page, "searcher", "find the guide")
    assert await _stored_results(app_server.base_url) == [
        {"type": "image", "mimeType": "image/png", "data": PNG, "url": None},
        {"type": "tool_result", "id": None, "name": "code_execution", "input": "print(6 * 7)", "output": HOSTILE,
         "status": "success"},
        {"type": "web_search", "url": "https://example.org/guide", "title": "The guide", "snippet": None},
        {"type": "web_search", "url": "https://news.example.com/a?b=1", "title": HOSTILE, "snippet": None},
        {"type": "web_search", "url": "javascript:window.__pwned = 2", "title": "Click me", "snippet": None}]


async def test_search_links_and_the_image_show_live_and_hostile_ones_stay_inert(
        browser: Any, app_server: Any) -> None:
    page = await browser.new_page()
    await page.goto(app_server.base_url + "/")
    await _turn(page, "searcher", "find the guide")
    await _assert_shown(page)


async def test_search_links_and_the_image_show_again_after_a_reload(browser: Any, app_server: Any) -> None:
    page = await browser.new_page()
    await page.goto(app_server.base_url + "/")
    await _turn(page, "searcher", "find the guide")
    await page.reload()
    await page.locator("#thread-list .thread-name").first.click()
    await _assert_shown(page)
