"""The web chat in Debian's headless Chromium: a message sent with the offline model streams
its reply in and shows the tool call as a card."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["server_fixtures"]

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]

pytestmark = pytest.mark.browser


@pytest.fixture
def chromium() -> str:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing (install Debian's chromium package)")
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    return CHROMIUM


@pytest.fixture
def dev_server(project_dir: Path, tmp_path: Path) -> Iterator[Any]:
    from server_fixtures import serve_app

    yield from serve_app(project_dir, f"sqlite+aiosqlite:///{tmp_path / 'browser.db'}", dev=True)


async def test_web_chat_streams_a_reply_with_a_tool_card(chromium: str, dev_server: Any) -> None:
    from playwright.async_api import async_playwright, expect

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
        try:
            page = await browser.new_page()
            await page.goto(dev_server.base_url + "/")
            await expect(page.locator("#agent-select option")).to_have_text(["helper"])
            await page.fill("#input", "please add two numbers")
            await page.click("#send")
            card = page.locator(".tool-card")
            await expect(card).to_have_count(1, timeout=15_000)
            await expect(card.locator(".tool-name")).to_have_text("add")
            await expect(card).to_have_attribute("data-state", "done", timeout=15_000)
            await expect(page.locator(".msg.user")).to_have_text("please add two numbers")
            reply = page.locator(".msg.assistant").last
            await expect(reply).not_to_be_empty(timeout=15_000)
            await expect(page.locator("#stop")).to_be_disabled(timeout=15_000)
            await expect(page.locator("#thread-list li")).to_have_count(1)
            assert await page.locator("#error").is_hidden()
        finally:
            await browser.close()
