"""A decided call's card in headless Chromium says who decided and when after a reload, drawn
as it was live: the stored result keeps the decision, and the reader's own reads "by you"."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from test_server_browser import chromium
from test_web_app_browser import _send, browser
from test_web_app_cards_browser import _reopen, app_server

__all__ = ["app_server", "browser", "chromium"]

pytestmark = pytest.mark.browser


async def test_an_approved_card_says_who_decided_and_when_after_a_reload(browser: Any, app_server: Any) -> None:
    from playwright.async_api import expect

    page = await browser.new_page()
    await page.goto(app_server.base_url + "/")
    await _send(page, "guard", "wipe the disk")
    card = page.locator(".tool-card")
    await expect(card).to_have_attribute("data-state", "waiting", timeout=15_000)
    await card.locator("button.approve").click()
    await expect(card).to_have_attribute("data-state", "done", timeout=15_000)
    await expect(card.locator(".decided")).to_have_count(1)
    async with httpx.AsyncClient(base_url=app_server.base_url) as api:
        thread_id = (await api.get("/api/threads")).json()["threads"][0]["id"]
        messages = (await api.get(f"/api/threads/{thread_id}/messages")).json()["messages"]
    [approval] = [m["metadata"]["approval"] for m in messages if m["role"] == "tool"]
    assert approval["approved"] is True and approval["decidedBy"] is not None
    await _reopen(page)
    reloaded = page.locator(".tool-card")
    await expect(reloaded).to_have_attribute("data-state", "done")
    # the time the server recorded, written as the live line writes its time
    at = await page.evaluate("ms => new Date(ms).toLocaleTimeString()", approval["decidedAt"])
    await expect(reloaded.locator(".decided")).to_have_text(f"approved by you at {at}")


async def test_a_call_another_person_approved_names_them_after_a_reload(browser: Any, app_server: Any) -> None:
    from playwright.async_api import expect

    page = await browser.new_page()
    await page.goto(app_server.base_url + "/")
    await _send(page, "guard", "wipe the disk")
    await expect(page.locator(".tool-card")).to_have_attribute("data-state", "waiting", timeout=15_000)
    # the server's admin "tester" decides through the API, not the person in the browser
    async with httpx.AsyncClient(base_url=app_server.base_url, headers=app_server.headers, timeout=30) as api:
        thread_id = (await api.get("/api/threads")).json()["threads"][0]["id"]
        [waiting] = (await api.get(f"/api/threads/{thread_id}/approvals")).json()["approvals"]
        decided = await api.post(f"/api/threads/{thread_id}/approvals",
                                 json={"token": waiting["token"], "approved": True})
        assert decided.status_code == 202, decided.text
        approval = None
        deadline = time.monotonic() + 15
        while approval is None and time.monotonic() < deadline:  # the resumed call stores its result
            messages = (await api.get(f"/api/threads/{thread_id}/messages")).json()["messages"]
            tools = [m["metadata"]["approval"] for m in messages if m["role"] == "tool"]
            if tools:
                approval = tools[0]
            else:
                await asyncio.sleep(0.05)
    assert approval is not None and approval["decidedBy"] == app_server.user_id
    assert approval["decidedByName"] == "tester"
    await _reopen(page)
    reloaded = page.locator(".tool-card")
    await expect(reloaded).to_have_attribute("data-state", "done")
    at = await page.evaluate("ms => new Date(ms).toLocaleTimeString()", approval["decidedAt"])
    await expect(reloaded.locator(".decided")).to_have_text(f"approved by tester at {at}")
