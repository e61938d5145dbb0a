"""The evals view in headless Chromium: stored runs, a run's table, two runs side by side, a
case opened in the inspector, and the inspector's capture button."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from evals_helpers import make_project
from standardagents import Runtime
from standardagents.evals import load_dataset, run_experiment
from standardagents.evals.runner import RunOptions
from standardagents.evals.storage import save_run
from test_server_browser import ARGS, chromium

__all__ = ["chromium"]

pytestmark = pytest.mark.browser

GOOD = "agent: assistant\ncases:\n  - {name: multiplies, input: 'What is 12 * 7?', expect: {contains: '84'}}\n"
BAD = "agent: assistant\ncases:\n  - {name: multiplies, input: 'What is 12 * 7?', expect: {contains: '85'}}\n"


@pytest.fixture
def evals_server(tmp_path: Path) -> Iterator[Any]:
    from server_fixtures import serve_app

    project = make_project(tmp_path / "p", {"basic.yaml": GOOD})
    url = f"sqlite+aiosqlite:///{tmp_path / 'evals.db'}"

    async def two_runs() -> None:
        rt = await Runtime.open(project, database_url=url, take_over=False)
        try:
            for label, text in (("before", GOOD), ("after", BAD)):
                (project / "evals" / "basic.yaml").write_text(text)
                report = await run_experiment(rt, [load_dataset(project / "evals" / "basic.yaml")],
                                              RunOptions(label=label))
                await save_run(rt.store, report)
        finally:
            await rt.aclose()

    asyncio.run(two_runs())
    for server in serve_app(project, url, dev=True):
        server.project = project
        yield server


@pytest.fixture
async def browser(chromium: str, evals_server: Any) -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=15_000)
    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
        try:
            yield b
        finally:
            await b.close()


async def test_evals_view_shows_runs_a_runs_cases_and_two_runs_side_by_side(browser: Any, evals_server: Any) -> None:
    from playwright.async_api import expect

    page = await browser.new_page()
    await page.goto(evals_server.base_url + "/")
    await page.click("#evals-toggle")
    runs = page.locator("#evals-view .evals-run")
    await expect(runs).to_have_count(2)
    await expect(runs.first).to_contain_text("after · 0 passed, 1 failed")
    await runs.first.locator(".evals-open").click()
    row = page.locator('#evals-detail tr[data-case="basic/multiplies"]')
    await expect(row).to_have_class("evals-fail")
    await expect(row.locator(".evals-reason")).to_have_text("contains: missing ['85']")
    for i in range(2):
        await runs.nth(i).locator("input[type=checkbox]").check()
    compared = page.locator('#evals-detail tr[data-case="basic/multiplies"]')
    await expect(page.locator("#evals-detail h3")).to_have_text("Side by side")
    await expect(compared).to_have_class("evals-regressed")
    await expect(compared.locator("td").nth(1)).to_have_text("pass contains=1.00")
    await expect(compared.locator("td").nth(2)).to_have_text("fail contains=0.00")


async def test_a_case_opens_its_thread_in_the_inspector_and_capture_adds_it_to_a_dataset(
        browser: Any, evals_server: Any) -> None:
    from playwright.async_api import expect

    page = await browser.new_page()
    await page.goto(evals_server.base_url + "/")
    await page.click("#evals-toggle")
    await page.locator("#evals-view .evals-run").last.locator(".evals-open").click()
    await page.locator('#evals-detail tr[data-case="basic/multiplies"] .evals-case-open').click()
    await expect(page.locator("#inspector")).to_be_visible()
    await expect(page.locator(".msg.assistant").last).to_contain_text("12 * 7 = 84")
    await page.click("#eval-capture")
    await expect(page.locator("#eval-capture-note")).to_contain_text("into evals/captured.yaml")
    written = yaml.safe_load((evals_server.project / "evals" / "captured.yaml").read_text())
    assert [c["reference"] for c in written["cases"]] == ["12 * 7 = 84"]
