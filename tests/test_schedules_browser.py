"""The web app's schedules view in headless Chromium: every schedule listed, paused, resumed
and deleted with its buttons, as the API then tells."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from server_fixtures import serve_app, write_project
from test_server_browser import ARGS, chromium

__all__ = ["chromium"]

pytestmark = pytest.mark.browser

WEEKLY = {"agents/schedules/weekly.py": """
    from standardagents.definitions.schedule import define_schedule
    weekly = define_schedule("weekly", agent="helper", message="the week's summary", cron="0 9 * * 1",
                             timezone="Europe/Paris")
"""}


@pytest.fixture
def dev_server(tmp_path: Path) -> Iterator[Any]:
    yield from serve_app(write_project(tmp_path / "project", WEEKLY), f"sqlite+aiosqlite:///{tmp_path / 'b.db'}",
                         dev=True)


async def test_schedules_view_pauses_resumes_and_deletes(chromium: str, dev_server: Any) -> None:
    from playwright.async_api import async_playwright, expect

    async with httpx.AsyncClient(base_url=dev_server.base_url, headers=dev_server.headers) as c:
        made = (await c.post("/api/schedules", json={"agent": "helper", "interval": 3600, "message": "hourly"})).json()
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
            try:
                page = await browser.new_page()
                await page.goto(dev_server.base_url + "/")
                await page.click("#schedules-toggle")
                rows = page.locator("#schedules-list li.schedule")
                await expect(rows).to_have_count(2)
                await expect(rows.locator("strong")).to_have_text(["weekly", made["id"]])
                await expect(rows.first).to_contain_text("cron 0 9 * * 1 (Europe/Paris)")
                mine = page.locator(f'li[data-schedule="{made["id"]}"]')
                await mine.locator('button[data-action="pause"]').click()
                await expect(mine).to_contain_text("paused")
                paused = (await c.get(f"/api/schedules/{made['id']}")).json()["paused"]
                await mine.locator('button[data-action="resume"]').click()
                await expect(mine.locator('button[data-action="pause"]')).to_have_count(1)
                resumed = (await c.get(f"/api/schedules/{made['id']}")).json()["paused"]
                await expect(rows.first.locator('button[data-action="delete"]')).to_have_count(0)
                await mine.locator('button[data-action="delete"]').click()
                await expect(rows).to_have_count(1)
                assert await page.locator("#error").is_hidden()
            finally:
                await browser.close()
        listed = (await c.get("/api/schedules")).json()["schedules"]
    assert (paused, resumed) == (True, False)
    assert [s["name"] for s in listed] == ["weekly"]
