"""The web chat in Debian's headless Chromium: a message sent with the offline model streams
its reply in and shows the tool call as a card."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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
            # the offline model has no price: the turn's tokens are shown, its cost is unknown
            await expect(page.locator(".turn-usage")).to_have_text(re.compile(r"^[1-9]\d* tokens · cost unknown$"))
            assert await page.locator("#error").is_hidden()
        finally:
            await browser.close()


PRICED_PROJECT = {
    "agents/agents/clerk.py": "from standardagents import define_agent\n"
                              "clerk = define_agent(name='clerk', side_a={'prompt': 'clerk_prompt'})\n",
    "agents/prompts/clerk_prompt.py": "from standardagents import define_prompt\n"
                                      "clerk_prompt = define_prompt(name='clerk_prompt', prompt='Be brief.', model='priced')\n",
    "agents/models/priced.py": "from standardagents import define_model\n"
                               "priced = define_model(name='priced', provider='test', model='offline',\n"
                               "                      prices={'input': 100.0, 'output': 200.0})\n",
}


@pytest.fixture
def priced_server(tmp_path: Path) -> Iterator[Any]:
    from server_fixtures import serve_app

    for rel, text in PRICED_PROJECT.items():
        (tmp_path / "clerk" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "clerk" / rel).write_text(text)
    yield from serve_app(tmp_path / "clerk", f"sqlite+aiosqlite:///{tmp_path / 'clerk.db'}", dev=True)


async def test_web_chat_shows_each_turns_tokens_and_cost(chromium: str, priced_server: Any) -> None:
    import httpx
    from playwright.async_api import async_playwright, expect

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
        try:
            page = await browser.new_page()
            await page.goto(priced_server.base_url + "/")
            await page.fill("#input", "hello")
            await page.click("#send")
            line = page.locator(".turn-usage")
            await expect(line).to_have_count(1, timeout=15_000)
            async with httpx.AsyncClient(base_url=priced_server.base_url) as api:
                threads = (await api.get("/api/threads")).json()
                thread_id = (threads["threads"] if isinstance(threads, dict) else threads)[0]["id"]
                detail = (await api.get(f"/api/threads/{thread_id}/executions")).json()
            executions = detail["executions"] if isinstance(detail, dict) else detail
            usage, cost = executions[0]["usage"], executions[0]["cost"]
            assert cost is not None and cost > 0
            await expect(line).to_have_text(f"{usage['total_tokens']} tokens · ${cost:.4f}")
        finally:
            await browser.close()


APPROVAL_PROJECT = {
    "agents/agents/ops.py": "from standardagents import define_agent\n"
                            "ops = define_agent(name='ops', side_a={'prompt': 'ops_prompt'})\n",
    "agents/prompts/ops_prompt.py": "from standardagents import define_prompt\n"
                                    "ops_prompt = define_prompt(name='ops_prompt', prompt='x', tools=['wipe'])\n",
    "agents/tools/wipe.py": "from standardagents import define_tool\n"
                            "@define_tool(needs_approval=True)\n"
                            "def wipe(target: str) -> str:\n"
                            "    '''Wipe a target.'''\n"
                            "    return f'wiped {target}'\n",
}


@pytest.fixture
def approval_server(tmp_path: Path) -> Iterator[Any]:
    from server_fixtures import serve_app

    for rel, text in APPROVAL_PROJECT.items():
        (tmp_path / "ops" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "ops" / rel).write_text(text)
    yield from serve_app(tmp_path / "ops", f"sqlite+aiosqlite:///{tmp_path / 'ops.db'}", dev=True)


async def test_web_chat_approves_a_paused_call_and_the_turn_continues(chromium: str, approval_server: Any) -> None:
    from playwright.async_api import async_playwright, expect

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
        try:
            page = await browser.new_page()
            await page.goto(approval_server.base_url + "/")
            await page.fill("#input", "clean the cache")
            await page.click("#send")
            card = page.locator(".tool-card")
            await expect(card).to_have_attribute("data-state", "waiting", timeout=15_000)
            # the call's arguments are shown once, with what the card waits for beside them
            await expect(card.locator(".tool-args")).to_contain_text("clean the cache")
            await expect(card.locator(".tool-detail")).to_have_text("waiting for your decision")
            await card.locator("button.approve").click()
            await expect(card).to_have_attribute("data-state", "done", timeout=15_000)
            await expect(page.locator(".msg.assistant").last).to_contain_text("wiped clean the cache", timeout=15_000)
            assert await page.locator("#error").is_hidden()
        finally:
            await browser.close()


@pytest.fixture
def quickstart_server(tmp_path: Path) -> Iterator[Any]:
    import shutil

    from server_fixtures import serve_app

    project = tmp_path / "quickstart"
    shutil.copytree(Path(__file__).parent.parent / "examples" / "quickstart", project,
                    ignore=shutil.ignore_patterns(".standardagents", "__pycache__"))
    yield from serve_app(project, f"sqlite+aiosqlite:///{tmp_path / 'quickstart.db'}", dev=True)


async def test_web_chat_labels_the_debates_sides_and_shows_the_verdict(chromium: str, quickstart_server: Any) -> None:
    from playwright.async_api import async_playwright, expect

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
        try:
            page = await browser.new_page()
            await page.goto(quickstart_server.base_url + "/")
            await expect(page.locator("#agent-select option")).to_have_text(["assistant", "debate"])
            await page.select_option("#agent-select", "debate")
            await page.fill("#input", "Tabs or spaces?")
            await page.click("#send")
            verdict = page.locator(".tool-card", has_text="conclude")
            await expect(verdict).to_have_attribute("data-state", "done", timeout=20_000)
            await expect(verdict.locator(".tool-detail")).to_have_text("Verdict: Both sides made their case.")
            advocate = page.locator('.msg.assistant[data-side="a"]').first
            skeptic = page.locator('.msg.assistant[data-side="b"]').first
            await expect(advocate).to_have_attribute("data-side-label", "Advocate")
            await expect(advocate).to_contain_text("argue FOR")
            await expect(skeptic).to_have_attribute("data-side-label", "Skeptic")
            await expect(skeptic).to_contain_text("argue AGAINST")
            assert await page.locator("#error").is_hidden()
        finally:
            await browser.close()
