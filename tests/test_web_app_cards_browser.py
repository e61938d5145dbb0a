"""The chat's cards in headless Chromium: a stopped reply is marked, each turn keeps its tokens
and cost after a reload, a tool's error reads the same live and after a reload, long tool
results are held to a few lines until "show all", a waiting call shows its arguments once, a
decided call says who decided and when; and at phone size (390x844) the title, the
composer's placeholder and the thread drawer fit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from test_server_browser import chromium
from test_web_app_browser import _project, _send, _turn, browser

__all__ = ["browser", "chromium"]

pytestmark = pytest.mark.browser

STALLING = "The first words of an answer that then waits for a long time"
TITLE = "please add two numbers for the weekly budget of the house"

EXTRA = {
    "agents/agents/breaker.py": "from standardagents import define_agent\n"
                                "breaker = define_agent(name='breaker', side_a={'prompt': 'breaker_prompt'})\n",
    "agents/prompts/breaker_prompt.py": "from standardagents import define_prompt\n"
                                        "breaker_prompt = define_prompt(name='breaker_prompt', prompt='x',\n"
                                        "                               tools=['format_disk', 'tell_story'])\n",
    "agents/tools/format_disk.py": "from standardagents import define_tool\n"
                                   "@define_tool\n"
                                   "def format_disk(disk: str) -> str:\n"
                                   "    '''Format a disk.'''\n"
                                   "    raise ValueError(f'the disk {disk} is read-only')\n",
    "agents/tools/tell_story.py": "from standardagents import define_tool\n"
                                  "@define_tool\n"
                                  "def tell_story(topic: str) -> str:\n"
                                  "    '''Tell a story.'''\n"
                                  "    return '\\n'.join(f'line {i} of the story' for i in range(60))\n",
}


@pytest.fixture
def app_server(tmp_path: Path) -> Iterator[Any]:
    from server_fixtures import serve_app
    from standardagents.testing.openai_stub import OpenAIStub, StubReply

    reply = StubReply(text=STALLING, chunk_size=8, stall_after_chunks=3, stall_seconds=5)
    with OpenAIStub(lambda body: reply) as stub:
        project = _project(tmp_path / "webapp", stub.base_url)
        for rel, text in EXTRA.items():
            (project / rel).write_text(text)
        yield from serve_app(project, f"sqlite+aiosqlite:///{project / 'app.db'}", dev=True)


async def _reopen(page: Any) -> None:
    await page.reload()
    await page.locator("#thread-list .thread-name").first.click()


async def test_a_stopped_reply_is_marked_live_and_after_a_reload(browser: Any, app_server: Any) -> None:
    from playwright.async_api import expect

    page = await browser.new_page()
    await page.goto(app_server.base_url + "/")
    await _send(page, "writer", "write something")
    reply = page.locator(".msg.assistant")
    await expect(reply).to_contain_text("The first words", timeout=15_000)
    await page.click("#stop")
    await expect(page.locator("#status")).to_have_text("stopped", timeout=15_000)
    await expect(reply.locator(".stopped-mark")).to_have_text("stopped")
    await _reopen(page)
    await expect(page.locator(".msg.assistant .stopped-mark")).to_have_text("stopped")


async def test_each_turn_keeps_its_tokens_and_cost_after_a_reload(browser: Any, app_server: Any) -> None:
    from playwright.async_api import expect

    page = await browser.new_page()
    await page.goto(app_server.base_url + "/")
    await _turn(page, "adder", "please add two numbers")
    await _turn(page, None, "now add them again")
    lines = page.locator(".turn-usage")
    live = await lines.all_inner_texts()
    async with httpx.AsyncClient(base_url=app_server.base_url) as api:
        thread_id = (await api.get("/api/threads")).json()["threads"][0]["id"]
        runs = (await api.get(f"/api/threads/{thread_id}/executions")).json()["executions"]
    assert live == [f"{r['usage']['total_tokens']} tokens · ${r['cost']:.4f}" for r in runs]
    await _reopen(page)
    await expect(lines).to_have_text(live)


async def test_a_tool_error_reads_the_same_live_and_after_a_reload(browser: Any, app_server: Any) -> None:
    from playwright.async_api import expect

    page = await browser.new_page()
    await page.goto(app_server.base_url + "/")
    await _turn(page, "breaker", "format the disk sda")
    card = page.locator(".tool-card")
    await expect(card).to_have_attribute("data-state", "failed")
    live = await card.locator(".tool-detail").inner_text()
    assert "the disk" in live and "read-only" in live and not live.startswith("Error:")
    await _reopen(page)
    await expect(page.locator(".tool-card .tool-detail")).to_have_text(live)


async def test_a_long_tool_result_is_held_to_a_few_lines_until_show_all(browser: Any, app_server: Any) -> None:
    from playwright.async_api import expect

    page = await browser.new_page()
    await page.goto(app_server.base_url + "/")
    await _turn(page, "breaker", "tell a story about ships")
    card = page.locator(".tool-card")
    detail = card.locator(".tool-detail")
    await expect(detail).to_have_class("tool-detail clipped")
    held = await detail.evaluate("e => e.clientHeight")
    await card.locator(".show-all").click()
    await expect(detail).to_have_class("tool-detail")
    assert await detail.evaluate("e => e.clientHeight") > held
    await expect(detail).to_contain_text("line 59 of the story")


async def test_a_waiting_card_shows_its_arguments_once(browser: Any, app_server: Any) -> None:
    from playwright.async_api import expect

    page = await browser.new_page()
    await page.goto(app_server.base_url + "/")
    await _send(page, "guard", "wipe the disk")
    card = page.locator(".tool-card")
    await expect(card).to_have_attribute("data-state", "waiting", timeout=15_000)
    text = await card.inner_text()
    assert text.count("wipe the disk") == 1, text


async def test_an_approved_card_says_who_decided_and_when(browser: Any, app_server: Any) -> None:
    from playwright.async_api import expect

    page = await browser.new_page()
    await page.goto(app_server.base_url + "/")
    await _send(page, "guard", "wipe the disk")
    card = page.locator(".tool-card")
    await expect(card).to_have_attribute("data-state", "waiting", timeout=15_000)
    await card.locator("button.approve").click()
    await expect(card).to_have_attribute("data-state", "done", timeout=15_000)
    decided = await card.locator(".decided").inner_text()
    assert decided.startswith("approved by you at ")


async def test_the_title_placeholder_and_drawer_fit_a_phone(browser: Any, app_server: Any, tmp_path: Path) -> None:
    from playwright.async_api import expect

    page = await browser.new_page(viewport={"width": 390, "height": 844})
    await page.goto(app_server.base_url + "/")
    await _turn(page, "adder", TITLE)
    title = page.locator("#thread-title")
    await expect(title).to_have_text(TITLE)
    # the whole title shows (on up to two lines), inside the screen
    fits = await title.evaluate("e => [e.scrollHeight <= e.clientHeight + 1, e.getBoundingClientRect().right]")
    assert fits[0] is True and fits[1] <= 390
    # the placeholder is one line of the composer
    one_line = await page.evaluate("""() => {
        const input = document.getElementById('input');
        const ctx = document.createElement('canvas').getContext('2d');
        ctx.font = getComputedStyle(input).font;
        return [input.placeholder, ctx.measureText(input.placeholder).width < input.clientWidth - 16];
    }""")
    assert one_line == ["Write a message…", True]
    # closed, the drawer casts no shadow on the page's edge
    assert await page.evaluate("getComputedStyle(document.getElementById('sidebar')).boxShadow") == "none"
    await page.screenshot(path=str(tmp_path / "phone-chat.png"))
    await page.click("#sidebar-open")
    dim = "getComputedStyle(document.body, '::after').backgroundColor"
    assert await page.evaluate(dim) == "rgba(0, 0, 0, 0.45)"
    await page.screenshot(path=str(tmp_path / "phone-drawer.png"))
    # a tap on the dimmed part closes the drawer
    await page.mouse.click(370, 420)
    await expect(page.locator("body")).not_to_have_class("show-sidebar")
    assert await page.evaluate(dim) in ("rgba(0, 0, 0, 0)", "")
