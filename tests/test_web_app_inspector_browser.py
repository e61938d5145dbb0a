"""The inspector's step content in headless Chromium, at desktop and phone sizes: the messages
a model step was sent (system prompt first), the tools offered with their schemas, the reply
with its tool call and the call's result, long text clipped with "show all", and the step
copied as the JSON the API serves. Screenshots go to the test's tmp dir."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from test_server_browser import chromium
from test_web_app_browser import _turn, app_server, browser

__all__ = ["app_server", "browser", "chromium"]

pytestmark = pytest.mark.browser

LONG = "please add two numbers. " + " ".join(f"word{i}" for i in range(400))


async def _steps(base_url: str) -> list[dict[str, Any]]:
    """Every step of the first thread's first turn, as the API serves them."""
    async with httpx.AsyncClient(base_url=base_url) as api:
        thread_id = (await api.get("/api/threads")).json()["threads"][0]["id"]
        (execution,) = (await api.get(f"/api/threads/{thread_id}/executions")).json()["executions"]
        detail = (await api.get(f"/api/executions/{execution['id']}")).json()
        return [(await api.get(f"/api/executions/{execution['id']}/steps/{s['index']}")).json()
                for s in detail["steps"]]


async def _open_step(page: Any, index: int) -> Any:
    from playwright.async_api import expect

    await page.locator("#inspector .bar.model").nth(index).click()
    content = page.locator("#inspector-detail .step-content")
    await expect(content).to_have_attribute("data-loaded", "true")
    await expect(page.locator("#inspector-detail")).to_have_attribute("data-step", str(index))
    return content


async def test_a_step_shows_the_messages_tools_and_reply_the_api_serves(browser: Any, app_server: Any,
                                                                       tmp_path: Path) -> None:
    from playwright.async_api import expect

    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    await page.goto(app_server.base_url + "/")
    await _turn(page, "adder", "please add two numbers")
    await page.click("#inspector-toggle")
    first, second = await _steps(app_server.base_url)
    content = await _open_step(page, 0)
    sent = content.locator(".sent-msg")
    await expect(sent).to_have_count(len(first["messages"]))
    assert await sent.evaluate_all("els => els.map(e => e.dataset.role)") == [m["role"] for m in first["messages"]]
    await expect(sent.first.locator("pre.content")).to_have_text(first["messages"][0]["content"])
    assert first["messages"][0] == {"role": "system", "content": "You add."}
    tool = content.locator(".offered-tool")
    await expect(tool).to_have_count(1)
    await expect(tool.locator("strong")).to_have_text("add")
    schema = json.loads(await tool.locator("pre.schema").inner_text())
    assert schema == first["tools"][0]["function"]["parameters"]
    (call,) = first["reply"]["toolCalls"]
    card = content.locator(f".step-call[data-tool-call='{call['id']}']")
    assert json.loads(await card.locator("pre.args").inner_text()) == json.loads(call["arguments"])
    await expect(card.locator("pre.result")).to_have_text(first["toolCalls"][0]["result"])
    await expect(card).to_have_attribute("data-status", "success")
    await page.screenshot(path=str(tmp_path / "inspector-step-desktop.png"))
    content = await _open_step(page, 1)
    await expect(content.locator(".sent-msg")).to_have_count(len(second["messages"]))
    await expect(content.locator("pre.reply")).to_have_text(second["reply"]["content"])


async def test_long_content_is_clipped_until_show_all(browser: Any, app_server: Any, tmp_path: Path) -> None:
    from playwright.async_api import expect

    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    await page.goto(app_server.base_url + "/")
    await _turn(page, "adder", LONG)
    await page.click("#inspector-toggle")
    content = await _open_step(page, 0)
    user = content.locator(".sent-msg[data-role='user']")
    await expect(user.locator("pre.content")).to_have_class("content clipped")
    clipped = await user.locator("pre.content").evaluate("e => e.clientHeight")
    await user.locator(".show-all").click()
    await expect(user.locator("pre.content")).to_have_class("content")
    await expect(user.locator(".show-all")).to_have_text("show less")
    assert await user.locator("pre.content").evaluate("e => e.clientHeight") > clipped
    await expect(user.locator("pre.content")).to_have_text(LONG)


async def test_copy_as_json_copies_the_step_the_api_serves(browser: Any, app_server: Any) -> None:
    from playwright.async_api import expect

    context = await browser.new_context(viewport={"width": 1400, "height": 900},
                                        permissions=["clipboard-read", "clipboard-write"])
    page = await context.new_page()
    await page.goto(app_server.base_url + "/")
    await _turn(page, "adder", "please add two numbers")
    await page.click("#inspector-toggle")
    first, _ = await _steps(app_server.base_url)
    content = await _open_step(page, 0)
    await content.locator(".copy-step").click()
    await expect(content.locator(".copy-step")).to_have_attribute("data-copied", "true")
    assert json.loads(await page.evaluate("navigator.clipboard.readText()")) == first


async def test_a_step_fits_a_phone_screen(browser: Any, app_server: Any, tmp_path: Path) -> None:
    from playwright.async_api import expect

    page = await browser.new_page(viewport={"width": 390, "height": 844})
    await page.goto(app_server.base_url + "/")
    await _turn(page, "adder", "please add two numbers")
    await page.click("#inspector-toggle")
    content = await _open_step(page, 0)
    await content.locator(".offered-tool").scroll_into_view_if_needed()
    await page.screenshot(path=str(tmp_path / "inspector-step-phone.png"))
    # nothing of the step is wider than the screen
    widest = await page.evaluate(
        "() => Math.max(...[...document.querySelectorAll('#inspector-detail *')].map(e => e.getBoundingClientRect().right))")
    assert widest <= 390
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
    await expect(content.locator(".sent-msg").first).to_be_visible()
