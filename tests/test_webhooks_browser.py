"""The web app's webhooks view in headless Chromium: a subscription's delivery log (a receiver
that failed once, then took the event), a replay that reaches the receiver again, a confirmed
delete, an API error written in the view, and the toggle hidden from a caller without
credentials."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from server_fixtures import LiveServer, serve_app, write_project
from test_server_browser import ARGS, chromium
from webhook_receiver import Receiver
from webhook_receiver import fast_retries as fast_retries  # the fixture

__all__ = ["chromium"]

pytestmark = pytest.mark.browser


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(failures=1).start()
    try:
        yield r
    finally:
        r.stop()


@pytest.fixture
def dev_server(tmp_path: Path, fast_retries: None) -> Iterator[LiveServer]:
    yield from serve_app(write_project(tmp_path / "project"), f"sqlite+aiosqlite:///{tmp_path / 'w.db'}", dev=True)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    yield from serve_app(write_project(tmp_path / "project"), f"sqlite+aiosqlite:///{tmp_path / 'w.db'}")


async def _log_until(c: httpx.AsyncClient, hook: str, attempts: int) -> dict[str, Any]:
    """The delivery log once it records ``attempts`` attempts (polled, bounded): the attempt is
    written right after the receiver's answer."""
    deadline = time.monotonic() + 20
    while True:
        log: dict[str, Any] = (await c.get(f"/api/webhooks/{hook}/deliveries")).json()
        if len(log["attempts"]) >= attempts and log["deliveries"][0]["status"] == "delivered":
            return log
        assert time.monotonic() < deadline, log
        await asyncio.sleep(0.05)


async def test_webhooks_view_shows_the_log_replays_and_deletes(chromium: str, dev_server: LiveServer,
                                                               receiver: Receiver) -> None:
    from playwright.async_api import async_playwright, expect

    async with httpx.AsyncClient(base_url=dev_server.base_url, headers=dev_server.headers, timeout=30) as c:
        hook = (await c.post("/api/webhooks", json={"url": receiver.url, "events": ["execution.done"]})).json()
        thread = (await c.post("/api/threads", json={"agent": "helper"})).json()
        turn = await c.post(f"/api/threads/{thread['id']}/messages?wait=true", json={"content": "hello"})
        assert turn.status_code == 200, turn.text
        [delivery] = (await _log_until(c, hook["id"], 2))["deliveries"]
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
            try:
                page = await browser.new_page()
                await page.goto(dev_server.base_url + "/")
                await page.click("#webhooks-toggle")
                row = page.locator(f'li.webhook[data-webhook="{hook["id"]}"]')
                await expect(row).to_contain_text(f"{receiver.url} · execution.done · every thread")
                await row.locator('button[data-action="deliveries"]').click()
                shown = row.locator(f'li.webhook-delivery[data-delivery="{delivery["id"]}"]')
                await expect(shown).to_have_attribute("data-status", "delivered")
                await expect(shown).to_contain_text("execution.done delivered · 2 attempts · last HTTP 200")
                await expect(shown.locator("li.webhook-attempt")).to_have_count(2)
                await expect(shown.locator("li.webhook-attempt").first).to_have_attribute("data-status", "500")
                await expect(shown.locator("li.webhook-attempt").nth(1)).to_have_attribute("data-status", "200")

                await shown.locator('button[data-action="replay"]').click()
                assert await asyncio.to_thread(receiver.wait_for, lambda got: len(got) == 3)
                await _log_until(c, hook["id"], 3)
                await row.locator('button[data-action="reload"]').click()
                await expect(shown.locator("li.webhook-attempt")).to_have_count(3)
                await expect(shown.locator("li.webhook-attempt").nth(2)).to_have_attribute("data-status", "200")

                page.once("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
                await row.locator('button[data-action="delete"]').click()
                await expect(page.locator("#webhooks-list li.webhook")).to_have_count(0)
                assert await page.locator("#webhooks-error").is_hidden()
            finally:
                await browser.close()
        listed = (await c.get("/api/webhooks")).json()["webhooks"]
    assert [(d.headers["webhook-id"], d.status) for d in receiver.got] == [
        (delivery["id"], 500), (delivery["id"], 200), (delivery["id"], 200)]
    assert listed == []


async def test_webhooks_view_writes_an_api_error_in_the_view(chromium: str, dev_server: LiveServer) -> None:
    from playwright.async_api import async_playwright, expect

    async with httpx.AsyncClient(base_url=dev_server.base_url, headers=dev_server.headers) as c:
        made = await c.post("/api/webhooks", json={"url": "http://127.0.0.1:9/hook", "events": ["*"]})
        assert made.status_code == 201, made.text
        hook = made.json()
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
            try:
                page = await browser.new_page()
                await page.goto(dev_server.base_url + "/")
                await page.click("#webhooks-toggle")
                row = page.locator(f'li.webhook[data-webhook="{hook["id"]}"]')
                await expect(row).to_have_count(1)
                assert (await c.delete(f"/api/webhooks/{hook['id']}")).status_code == 200
                page.once("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
                await row.locator('button[data-action="delete"]').click()
                await expect(page.locator("#webhooks-error")).to_have_text(
                    f"unknown webhook {hook['id']!r} (GET /api/webhooks lists yours)")
                await expect(page.locator("#webhooks-list li.webhook")).to_have_count(0)
                assert await page.locator("#error").is_hidden()
            finally:
                await browser.close()


async def test_webhooks_toggle_is_hidden_until_the_caller_has_credentials(chromium: str, server: LiveServer) -> None:
    from playwright.async_api import async_playwright, expect

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
        try:
            page = await browser.new_page()
            await page.goto(server.base_url + "/")
            await expect(page.locator("#error")).to_be_visible()  # the page's own calls were refused
            await expect(page.locator("#webhooks-toggle")).to_be_hidden()
            await page.fill("#token-input", server.token)
            await page.click("#token-save")
            await expect(page.locator("#webhooks-toggle")).to_be_visible()
        finally:
            await browser.close()
