"""The web app's memory view in Debian's headless Chromium: search by meaning, edit a value,
delete an item (the agent forgets it), each checked against the REST API."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from server_fixtures import serve_app, write_project
from test_server_browser import ARGS, chromium

__all__ = ["chromium"]

pytestmark = pytest.mark.browser

FACTS = {"dog": "My dog is called Rex", "car": "I drive a green Volvo", "food": "I love ramen with garlic"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Any]:
    yield from serve_app(write_project(tmp_path / "p"), f"sqlite:///{tmp_path / 'web.db'}", dev=True)


@pytest.fixture
async def page(chromium: str, server: Any) -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=15_000)
    async with httpx.AsyncClient(base_url=f"{server.base_url}/api") as c:
        for key, text in FACTS.items():
            r = await c.put("/store/items", json={"namespace": ["user", "u1", "facts"], "key": key, "value": {"text": text}})
            assert r.status_code == 204
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
        try:
            page = await browser.new_page()
            await page.goto(server.base_url + "/")
            await page.click("#memory-toggle")
            yield page
        finally:
            await browser.close()


async def _item(server: Any, key: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=f"{server.base_url}/api") as c:
        return await c.get("/store/items", params={"namespace": "user.u1.facts", "key": key})


async def test_the_memory_view_ranks_a_search_by_meaning(page: Any) -> None:
    from playwright.async_api import expect

    await expect(page.locator("#memory-list li.memory-item")).to_have_count(3)
    await page.fill("#memory-query", "what is my dog called")
    await page.click("#memory-search button[type=submit]")
    await expect(page.locator("#memory-list li.memory-item").first).to_have_attribute("data-key", "dog")
    await expect(page.locator("#memory-list li.memory-item").first.locator(".memory-score")).to_contain_text("score 0.")


async def test_editing_a_value_in_the_memory_view_stores_it(page: Any, server: Any) -> None:
    from playwright.async_api import expect

    item = page.locator('#memory-list li.memory-item[data-key="dog"]')
    await item.locator('button[data-action="edit"]').click()
    await item.locator("textarea").fill('{"text": "My dog is called Bruno"}')
    await item.locator('button[data-action="save"]').click()
    await expect(page.locator('#memory-list li.memory-item[data-key="dog"] .memory-value')).to_have_text(
        '{"text":"My dog is called Bruno"}')
    assert (await _item(server, "dog")).json()["value"] == {"text": "My dog is called Bruno"}


async def test_deleting_in_the_memory_view_makes_the_agent_forget(page: Any, server: Any) -> None:
    from playwright.async_api import expect

    await page.locator('#memory-list li.memory-item[data-key="car"] button[data-action="delete"]').click()
    await expect(page.locator("#memory-list li.memory-item")).to_have_count(2)
    assert (await _item(server, "car")).status_code == 404
