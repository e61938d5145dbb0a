"""The web app with a subagent: the child thread a dual_ai subagent runs in is shown inside
the parent's tool card (loaded through the API), never as a thread of its own in the list."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from standardagents.testing.openai_stub import OpenAIStub, StubReply
from test_server_browser import chromium
from test_web_app_browser import browser

__all__ = ["browser", "chromium"]  # fixtures (this file's app_server is the one they use)

pytestmark = pytest.mark.browser

SHOTS = Path(__file__).parent / "screenshots"


def _project(root: Path, stub_url: str) -> Path:
    files = {
        "agents/agents/boss.py": "from standardagents import define_agent\n"
                                 "boss = define_agent(name='boss', side_a={'prompt': 'boss_prompt'})\n",
        "agents/prompts/boss_prompt.py": "from standardagents import define_prompt\n"
                                         "boss_prompt = define_prompt(name='boss_prompt', prompt='You lead.',\n"
                                         "                            model='stubbed', tools=['researcher'])\n",
        "agents/agents/researcher.py": "from standardagents import define_agent\n"
                                       "researcher = define_agent(\n"
                                       "    name='researcher', type='dual_ai', max_session_turns=6, expose_as_tool=True,\n"
                                       "    tool_description='Research a question.',\n"
                                       "    side_a={'prompt': 'lead', 'session_stop': {'name': 'deliver', 'message_property': 'summary'}},\n"
                                       "    side_b={'prompt': 'critic'})\n",
        "agents/prompts/lead.py": "from standardagents import define_prompt\n"
                                  "lead = define_prompt(name='lead', prompt='You research.', model='stubbed')\n",
        "agents/prompts/critic.py": "from standardagents import define_prompt\n"
                                    "critic = define_prompt(name='critic', prompt='You critique.', model='stubbed')\n",
        "agents/models/stubbed.py": "from standardagents import define_model\n"
                                    f"stubbed = define_model(name='stubbed', provider='openai', model='stub-model',\n"
                                    f"                       base_url={stub_url!r}, max_retries=0)\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as server:
        yield server


@pytest.fixture
def app_server(tmp_path: Path, stub: OpenAIStub) -> Iterator[Any]:
    from server_fixtures import serve_app

    project = _project(tmp_path / "webapp", stub.base_url)
    yield from serve_app(project, f"sqlite+aiosqlite:///{tmp_path / 'webapp.db'}", dev=True)


def _call(name: str, **args: Any) -> StubReply:
    return StubReply(tool_calls=[(name, json.dumps(args))])


async def test_a_subagents_thread_opens_inside_the_parents_tool_card(browser: Any, app_server: Any, stub: OpenAIStub) -> None:
    from playwright.async_api import expect

    lead_may_answer = threading.Event()
    stub.queue(
        _call("researcher", message="How do tides work?"),
        StubReply(text="Draft: the moon pulls the sea.", hold=lead_may_answer),
        "Add the sun's part.",
        _call("deliver", summary="Tides come from the moon and the sun."),
        "The research is done.",
    )
    page = await browser.new_page()
    await page.goto(app_server.base_url + "/")
    await page.select_option("#agent-select", "boss")
    await page.fill("#input", "Research tides.")
    await page.press("#input", "Enter")
    # while the child runs, its thread can already be opened from the running card
    running = page.locator('.tool-card[data-state="running"]', has_text="researcher")
    await running.locator("details.subagent-thread summary").click()
    await expect(running.locator(".sub-msg")).to_have_text(["userHow do tides work?"])
    await running.locator("details.subagent-thread summary").click()
    lead_may_answer.set()
    await expect(page.locator(".msg.assistant").last).to_contain_text("The research is done.", timeout=20_000)
    await expect(page.locator("#stop")).to_be_disabled()

    # two threads are stored, the list shows only the parent
    async with httpx.AsyncClient(base_url=app_server.base_url) as client:
        every = (await client.get("/api/threads")).json()["threads"]
        top = (await client.get("/api/threads", params={"top_level": "true"})).json()["threads"]
    assert len(every) == 2 and len(top) == 1 and top[0]["parent_id"] is None
    [child] = [t for t in every if t["parent_id"] is not None]
    await expect(page.locator("#thread-list li")).to_have_count(1)
    await expect(page.locator("#thread-list li")).to_have_attribute("data-thread-id", top[0]["id"])

    card = page.locator('.tool-card[data-state="done"]', has_text="researcher")
    box = card.locator("details.subagent-thread")
    await expect(box).to_have_attribute("data-child-thread", child["id"])
    await expect(box.locator("summary")).to_have_text("researcher's thread (complete)")
    assert await box.evaluate("el => el.open") is False
    await box.locator("summary").click()
    messages = box.locator(".sub-msg")
    await expect(messages.first).to_contain_text("How do tides work?")
    await expect(box).to_contain_text("Draft: the moon pulls the sea.")
    await expect(box).to_contain_text("Add the sun's part.")
    await expect(box.locator(".sub-call")).to_contain_text("deliver")
    SHOTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(SHOTS / "subagent-thread.png"))

    # after a reload the card finds its child thread again
    await page.reload()
    await page.locator("#thread-list li .thread-name").click()
    box = page.locator("details.subagent-thread")
    await expect(box).to_have_attribute("data-child-thread", child["id"])
    await box.locator("summary").click()
    await expect(box).to_contain_text("Draft: the moon pulls the sea.")
