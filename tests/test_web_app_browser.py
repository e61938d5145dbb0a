"""The web app in Debian's headless Chromium: markdown that no model reply can turn into
script, the inspector's timeline against the executions API, forks from an edited message,
stop, a phone-sized viewport and dark mode. Screenshots of each view go to
``tests/screenshots/`` (ignored by git) for review."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from standardagents.testing.openai_stub import OpenAIStub, StubReply
from test_server_browser import ARGS, chromium

__all__ = ["chromium"]

pytestmark = pytest.mark.browser

SHOTS = Path(__file__).parent / "screenshots"

HOSTILE = (
    "# Plan\n\nSome **bold** words and `inline code`.\n\n"
    "```python\nprint('hi')\n" + "x = '" + "long" * 60 + "'\n```\n\n"
    "| a | b |\n|---|---|\n| 1 | 2 |\n\n"
    "<script>window.__pwned = 1; document.body.appendChild(Object.assign(document.createElement('div'), "
    "{id: 'pwned'}))</script>\n\n"
    "<img src=x onerror=\"alert('xss'); document.body.dataset.pwned = 1\">\n\n"
    "<p onclick=\"alert(2)\">click me</p> and <a href=\"javascript:alert(3)\">a link</a>\n"
)


def _project(root: Path, stub_url: str) -> Path:
    files = {
        "agents/agents/adder.py": "from standardagents import define_agent\n"
                                  "adder = define_agent(name='adder', side_a={'prompt': 'adder_prompt'})\n",
        "agents/prompts/adder_prompt.py": "from standardagents import define_prompt\n"
                                          "adder_prompt = define_prompt(name='adder_prompt', prompt='You add.',\n"
                                          "                             model='priced', tools=['add'])\n",
        "agents/models/priced.py": "from standardagents import define_model\n"
                                   "priced = define_model(name='priced', provider='test', model='offline',\n"
                                   "                      prices={'input': 100.0, 'output': 200.0})\n",
        "agents/tools/add.py": "from standardagents import define_tool\n"
                               "@define_tool\n"
                               "def add(a: int = 1, b: int = 2) -> str:\n"
                               "    '''Add two integers.'''\n"
                               "    return str(a + b)\n",
        "agents/agents/writer.py": "from standardagents import define_agent\n"
                                   "writer = define_agent(name='writer', side_a={'prompt': 'writer_prompt'})\n",
        "agents/prompts/writer_prompt.py": "from standardagents import define_prompt\n"
                                           "writer_prompt = define_prompt(name='writer_prompt', prompt='Write.',\n"
                                           "                              model='stubbed')\n",
        "agents/models/stubbed.py": "from standardagents import define_model\n"
                                    f"stubbed = define_model(name='stubbed', provider='openai', model='stub-model',\n"
                                    f"                       base_url={stub_url!r}, max_retries=0)\n",
        "agents/agents/sleeper.py": "from standardagents import define_agent\n"
                                    "sleeper = define_agent(name='sleeper', side_a={'prompt': 'sleeper_prompt'})\n",
        "agents/prompts/sleeper_prompt.py": "from standardagents import define_prompt\n"
                                            "sleeper_prompt = define_prompt(name='sleeper_prompt', prompt='Wait.',\n"
                                            "                               tools=['wait_for_ever'])\n",
        "agents/tools/wait_for_ever.py": "import asyncio\n"
                                         "from standardagents import define_tool\n"
                                         "@define_tool\n"
                                         "async def wait_for_ever(what: str) -> str:\n"
                                         "    '''Wait until stopped.'''\n"
                                         "    await asyncio.Event().wait()\n"
                                         "    return 'never'\n",
        "agents/agents/twin.py": "from standardagents import define_agent\n"
                                 "twin = define_agent(name='twin', side_a={'prompt': 'twin_prompt'})\n",
        "agents/prompts/twin_prompt.py": "from standardagents import define_prompt\n"
                                         "twin_prompt = define_prompt(name='twin_prompt', prompt='x', tools=['add', 'mul'])\n",
        "agents/tools/mul.py": "from standardagents import define_tool\n"
                               "@define_tool\n"
                               "def mul(a: int = 2, b: int = 3) -> str:\n"
                               "    '''Multiply two integers.'''\n"
                               "    return str(a * b)\n",
        "agents/agents/guard.py": "from standardagents import define_agent\n"
                                  "guard = define_agent(name='guard', side_a={'prompt': 'guard_prompt'})\n",
        "agents/prompts/guard_prompt.py": "from standardagents import define_prompt\n"
                                          "guard_prompt = define_prompt(name='guard_prompt', prompt='x', tools=['wipe'])\n",
        "agents/tools/wipe.py": "from standardagents import define_tool\n"
                                "@define_tool(needs_approval=True)\n"
                                "def wipe(target: str) -> str:\n"
                                "    '''Wipe a target.'''\n"
                                "    return f'wiped {target}'\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture
def app_server(tmp_path: Path) -> Iterator[Any]:
    from server_fixtures import serve_app

    with OpenAIStub(lambda body: StubReply(text=HOSTILE, chunk_size=24)) as stub:
        project = _project(tmp_path / "webapp", stub.base_url)
        yield from serve_app(project, f"sqlite+aiosqlite:///{tmp_path / 'webapp.db'}", dev=True)


@pytest.fixture
async def browser(chromium: str, app_server: Any) -> AsyncIterator[Any]:
    """Closed before the server stops (the page keeps the thread's event stream open)."""
    from playwright.async_api import async_playwright, expect

    # the machine may be busy: waiting longer costs nothing when things go right
    expect.set_options(timeout=15_000)

    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
        try:
            yield b
        finally:
            await b.close()


async def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=False)


async def _send(page: Any, agent: str | None, text: str) -> None:
    """``text`` sent from the composer (to ``agent``, picked first, when given)."""
    if agent is not None:
        await page.select_option("#agent-select", agent)
    await page.fill("#input", text)
    await page.press("#input", "Enter")


async def _turn(page: Any, agent: str | None, text: str) -> None:
    from playwright.async_api import expect

    ended = page.locator(".turn-usage")
    before = await ended.count()
    await _send(page, agent, text)
    await expect(ended).to_have_count(before + 1, timeout=15_000)
    await expect(page.locator("#stop")).to_be_disabled(timeout=15_000)


async def test_markdown_renders_and_nothing_from_a_reply_runs(browser: Any, app_server: Any) -> None:
    from playwright.async_api import expect

    page = await browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    response = await page.goto(app_server.base_url + "/")
    assert response is not None and "script-src 'self'" in response.headers["content-security-policy"]
    # and markup that got past the sanitizer still could not run its inline handlers
    ran = await page.evaluate("""() => new Promise((resolve) => {
        document.body.insertAdjacentHTML('beforeend', '<img id="probe" src="/nothing" onerror="window.__inline = 1">');
        document.getElementById('probe').addEventListener('error', () => setTimeout(() => {
            document.getElementById('probe').remove();
            resolve(window.__inline === 1);
        }, 0));
    })""")
    assert ran is False
    await expect(page.locator("#agent-select option")).to_have_count(5)
    await page.select_option("#agent-select", "writer")
    # Shift+Enter makes a new line; Enter sends
    await page.fill("#input", "write a <img src=y onerror=\"alert('user')\"> plan")
    await page.press("#input", "Shift+Enter")
    await page.keyboard.type("please")
    assert await page.input_value("#input") == "write a <img src=y onerror=\"alert('user')\"> plan\nplease"
    await page.press("#input", "Enter")
    reply = page.locator(".msg.assistant").last
    await expect(reply.locator("h1")).to_have_text("Plan", timeout=15_000)
    await expect(page.locator("#stop")).to_be_disabled(timeout=15_000)

    async def check() -> None:
        await expect(reply.locator("strong")).to_have_text("bold")
        await expect(reply.locator("pre code")).to_contain_text("print('hi')")
        # highlighted as Python once highlight.js and its grammar loaded
        await expect(reply.locator("pre code .hljs-string").first).to_have_text("'hi'")
        await expect(reply.locator("table td")).to_have_text(["1", "2"])
        await expect(reply).to_contain_text("click me")
        messages = page.locator("#messages")
        for selector in ("script", "img", "[onerror]", "[onclick]", "#pwned", "a[href^='javascript']"):
            assert await messages.locator(selector).count() == 0, selector
        assert await page.locator("#pwned").count() == 0
        assert await page.evaluate("window.__pwned === undefined && document.body.dataset.pwned === undefined")
        assert dialogs == []

    await check()
    await expect(page.locator(".msg.user").first).to_contain_text("plan")
    # a code block has a copy button
    copy = reply.locator("pre .copy-code")
    await expect(copy).to_have_count(1)
    await copy.click()
    await expect(copy).to_have_attribute("data-copied", "true")
    await shot(page, "chat-markdown")
    # the same after a reload
    await page.reload()
    await page.locator("#thread-list .thread-name").first.click()
    reply = page.locator(".msg.assistant").last
    await expect(reply.locator("h1")).to_have_text("Plan")
    await check()


async def test_the_inspector_timeline_matches_the_executions_api(browser: Any, app_server: Any) -> None:
    from playwright.async_api import expect

    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    await page.goto(app_server.base_url + "/")
    await _turn(page, "adder", "please add two numbers")
    card = page.locator(".tool-card")
    await expect(card).to_have_attribute("data-state", "done")
    live_card = await card.evaluate("el => el.innerText")
    await page.click("#inspector-toggle")
    turns = page.locator("#inspector .turn")
    await expect(turns).to_have_count(1)
    async with httpx.AsyncClient(base_url=app_server.base_url) as api:
        thread_id = (await api.get("/api/threads")).json()["threads"][0]["id"]
        listed = (await api.get(f"/api/threads/{thread_id}/executions")).json()["executions"]
        detail = (await api.get(f"/api/executions/{listed[0]['id']}")).json()
    steps = detail["steps"]
    assert len(steps) == 2 and len(steps[0]["toolCalls"]) == 1
    bars = turns.first.locator(".bar.model")
    await expect(bars).to_have_count(len(steps))
    # where each bar starts and how long it is, as the recorded durations lay them out
    cursor, expected = 0.0, []
    for step in steps:
        expected.append(("model", cursor, step["latencyMs"]))
        cursor += step["latencyMs"]
        longest = 0.0
        for call in step["toolCalls"]:
            expected.append(("tool", cursor, call["durationMs"]))
            longest = max(longest, call["durationMs"])
        cursor += longest
    span = max(cursor, 1)
    drawn = await turns.first.locator(".bar").evaluate_all(
        "els => els.map(e => [e.classList.contains('tool') ? 'tool' : 'model', parseFloat(e.style.left), parseFloat(e.style.width)])")
    assert [d[0] for d in drawn] == [e[0] for e in expected]
    for (_, left, width), (_, start, length) in zip(drawn, expected, strict=True):
        assert left == pytest.approx(start / span * 100, abs=1e-3)
        assert width == pytest.approx(max(length / span * 100, 0.5), abs=1e-3)
    for i, step in enumerate(steps):
        bar = bars.nth(i)
        assert int(await bar.get_attribute("data-tokens")) == step["usage"]["total_tokens"]
        assert float(await bar.get_attribute("data-cost")) == pytest.approx(step["cost"])
        assert float(await bar.get_attribute("data-latency-ms")) == pytest.approx(step["latencyMs"])
    call = steps[0]["toolCalls"][0]
    tool_bar = turns.first.locator(".bar.tool")
    assert float(await tool_bar.get_attribute("data-duration-ms")) == pytest.approx(call["durationMs"])
    figures = turns.first.locator(".turn-figures")
    assert int(await figures.get_attribute("data-tokens")) == detail["usage"]["total_tokens"]
    assert float(await figures.get_attribute("data-cost")) == pytest.approx(detail["cost"])
    await expect(figures).to_contain_text(f"{detail['usage']['total_tokens']} tokens · ${detail['cost']:.4f}")
    # a step shows its request and reply, a tool its arguments and result
    await bars.nth(0).click()
    info = page.locator("#inspector-detail")
    await expect(info).to_contain_text("tools offered")
    await expect(info).to_contain_text("add")
    await expect(info).to_contain_text(f"{steps[0]['usage']['total_tokens']} total")
    await expect(info).to_contain_text("tool_calls")
    await tool_bar.click()
    await expect(info.locator("pre.args")).to_contain_text('"a"')
    await expect(info.locator("pre.result")).to_have_text(str(call["result"]))
    await shot(page, "inspector")
    # the inspector follows a new turn as it ends, with thread totals
    await _turn(page, None, "again please")
    await expect(turns).to_have_count(2)
    async with httpx.AsyncClient(base_url=app_server.base_url) as api:
        listed = (await api.get(f"/api/threads/{thread_id}/executions")).json()["executions"]
    total = sum(e["usage"]["total_tokens"] for e in listed)
    await expect(page.locator("#inspector-totals")).to_have_attribute("data-tokens", str(total))
    # and a turn that another client started
    async with httpx.AsyncClient(base_url=app_server.base_url) as api:
        done = await api.post(f"/api/threads/{thread_id}/messages?wait=true", json={"content": "add from the API"})
        assert done.status_code == 200, done.text
    await expect(turns).to_have_count(3)
    # a tool card reads the same after a reload as it did live
    await page.reload()
    await page.locator("#thread-list .thread-name").first.click()
    await expect(page.locator(".tool-card")).to_have_count(3)
    assert await page.locator(".tool-card").first.evaluate("el => el.innerText") == live_card


async def test_editing_a_message_resends_it_in_a_fork(browser: Any, app_server: Any) -> None:
    from playwright.async_api import expect

    page = await browser.new_page()
    await page.goto(app_server.base_url + "/")
    await _turn(page, "adder", "first question")
    await _turn(page, None, "second question")
    source = page.locator(".msg.user").nth(1)
    await source.hover()
    await source.locator("button.edit").click()
    assert await page.input_value("#input") == "second question"
    await expect(page.locator("#editing")).to_be_visible()
    await page.fill("#input", "an edited question")
    await page.press("#input", "Enter")
    await expect(page.locator("#thread-list li")).to_have_count(2, timeout=15_000)
    await expect(page.locator("#stop")).to_be_disabled(timeout=15_000)
    await expect(page.locator("#thread-title")).to_contain_text("(fork)")
    await expect(page.locator(".msg.user")).to_have_text(["first question", "an edited question"])
    async with httpx.AsyncClient(base_url=app_server.base_url) as api:
        threads = (await api.get("/api/threads")).json()["threads"]
        fork = next(t for t in threads if "forkedFrom" in t["metadata"])
        original = next(t for t in threads if t["id"] != fork["id"])
        assert fork["metadata"]["forkedFrom"]["threadId"] == original["id"]
        before = (await api.get(f"/api/threads/{original['id']}/messages")).json()["messages"]
        after = (await api.get(f"/api/threads/{fork['id']}/messages")).json()["messages"]
    asked = [m["content"] for m in before if m["role"] == "user"]
    assert asked == ["first question", "second question"]
    assert [m["content"] for m in after if m["role"] == "user"] == ["first question", "an edited question"]
    await shot(page, "fork")
    # regenerate the last reply: another fork, the question asked again
    last = page.locator(".msg.assistant").last
    await last.hover()
    await last.locator("button.regenerate").click()
    await expect(page.locator("#thread-list li")).to_have_count(3, timeout=15_000)
    await expect(page.locator("#stop")).to_be_disabled(timeout=15_000)
    await expect(page.locator(".msg.user")).to_have_text(["first question", "an edited question"])


async def test_rename_search_filter_and_delete_threads(browser: Any, app_server: Any) -> None:
    from playwright.async_api import expect

    page = await browser.new_page()
    page.on("dialog", lambda d: d.accept())
    await page.goto(app_server.base_url + "/")
    await _turn(page, "adder", "sum")
    # a new thread is named after its first message
    await expect(page.locator("#thread-list .thread-name")).to_have_text(["sum"])
    await expect(page.locator("#thread-title")).to_have_text("sum")
    await page.click("#new-thread")
    await expect(page.locator("#thread-list li")).to_have_count(2)
    first = page.locator("#thread-list li").last
    await first.locator("button.rename").click()
    await page.fill(".rename-field", "Sums of things")
    await page.press(".rename-field", "Enter")
    await expect(page.locator("#thread-list .thread-name", has_text="Sums of things")).to_have_count(1)
    await page.fill("#thread-search", "sums")
    await expect(page.locator("#thread-list li")).to_have_count(1)
    await page.fill("#thread-search", "")
    await page.select_option("#filter-agent", "writer")
    await expect(page.locator("#thread-list li")).to_have_count(0)
    await page.select_option("#filter-agent", "adder")
    await expect(page.locator("#thread-list li")).to_have_count(2)
    await page.select_option("#filter-status", "running")
    await expect(page.locator("#thread-list li")).to_have_count(0)
    await page.select_option("#filter-status", "")
    await page.locator("#thread-list li", has_text="Sums of things").locator("button.delete").click()
    await expect(page.locator("#thread-list li")).to_have_count(1)
    async with httpx.AsyncClient(base_url=app_server.base_url) as api:
        titles = [t["title"] for t in (await api.get("/api/threads")).json()["threads"]]
    assert "Sums of things" not in titles and len(titles) == 1


async def test_escape_stops_a_running_turn(browser: Any, app_server: Any) -> None:
    from playwright.async_api import expect

    page = await browser.new_page()
    await page.goto(app_server.base_url + "/")
    await _send(page, "sleeper", "wait")
    card = page.locator(".tool-card")
    await expect(card).to_have_attribute("data-state", "running", timeout=15_000)
    await expect(page.locator("#stop")).to_be_enabled()
    await page.keyboard.press("Escape")
    await expect(page.locator("#status")).to_have_text("stopped", timeout=15_000)
    await expect(page.locator("#send")).to_be_enabled()
    async with httpx.AsyncClient(base_url=app_server.base_url) as api:
        thread_id = (await api.get("/api/threads")).json()["threads"][0]["id"]
        executions = (await api.get(f"/api/threads/{thread_id}/executions")).json()["executions"]
    assert [(e["status"], e["stopReason"]) for e in executions] == [("cancelled", "cancelled")], executions


async def test_a_phone_sized_viewport_in_dark_mode(browser: Any, app_server: Any) -> None:
    from playwright.async_api import expect

    context = await browser.new_context(viewport={"width": 390, "height": 844}, color_scheme="dark")
    page = await context.new_page()
    await page.goto(app_server.base_url + "/")
    background = "getComputedStyle(document.body).backgroundColor"
    assert await page.evaluate(background) == "rgb(15, 17, 21)"
    await _turn(page, "writer", "a plan with a long code line")
    await expect(page.locator(".msg.assistant h1")).to_have_text("Plan")
    await page.locator("#sidebar-open").click()
    await expect(page.locator("#thread-list li")).to_have_count(1)
    box = await page.locator("#sidebar").bounding_box()
    assert box is not None and box["x"] >= 0
    await shot(page, "mobile-sidebar-dark")
    await page.locator("#thread-list .thread-name").last.click()
    await expect(page.locator(".msg.assistant h1")).to_have_text("Plan")
    overflow = "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    assert await page.evaluate(overflow) <= 0
    widths = await page.locator("#messages > *").evaluate_all("els => els.map(e => e.getBoundingClientRect().right)")
    assert widths and max(widths) <= 390
    await shot(page, "mobile-chat-dark")
    await page.click("#inspector-toggle")
    await expect(page.locator("#inspector .turn")).to_have_count(1)
    assert await page.evaluate(overflow) <= 0
    await shot(page, "mobile-inspector-dark")
    await page.click("#inspector-close")
    # the toggle overrides the system's preference, and is remembered
    await page.click("#theme-toggle")
    assert await page.evaluate(background) == "rgb(246, 247, 249)"
    await page.reload()
    assert await page.evaluate(background) == "rgb(246, 247, 249)"
    await shot(page, "mobile-light")
    await context.close()


async def test_a_denied_call_fails_its_card_and_the_turn_goes_on(browser: Any, app_server: Any) -> None:
    from playwright.async_api import expect

    page = await browser.new_page()
    await page.goto(app_server.base_url + "/")
    await _send(page, "guard", "wipe the disk")
    card = page.locator(".tool-card")
    await expect(card).to_have_attribute("data-state", "waiting", timeout=15_000)
    await expect(card.locator(".tool-args")).to_contain_text("wipe the disk")
    await shot(page, "approval-waiting")
    await card.locator("button.deny").click()
    await expect(card).to_have_attribute("data-state", "failed", timeout=15_000)
    await expect(page.locator(".msg.assistant")).to_have_count(1, timeout=15_000)
    await expect(page.locator("#stop")).to_be_disabled(timeout=15_000)
    await expect(card.locator(".approval")).to_have_count(0)
    async with httpx.AsyncClient(base_url=app_server.base_url) as api:
        thread_id = (await api.get("/api/threads")).json()["threads"][0]["id"]
        messages = (await api.get(f"/api/threads/{thread_id}/messages")).json()["messages"]
    results = [m for m in messages if m["role"] == "tool"]
    assert len(results) == 1 and results[0]["tool_status"] == "error"
    assert not any("wiped" in (m["content"] or "") for m in messages)


async def test_a_waiting_call_can_be_approved_after_a_reload(browser: Any, app_server: Any) -> None:
    from playwright.async_api import expect

    page = await browser.new_page()
    await page.goto(app_server.base_url + "/")
    await _send(page, "guard", "wipe the cache")
    await expect(page.locator(".tool-card")).to_have_attribute("data-state", "waiting", timeout=15_000)
    await expect(page.locator("#stop")).to_be_disabled(timeout=15_000)
    await page.reload()
    await page.locator("#thread-list .thread-name").first.click()
    card = page.locator(".tool-card")
    await expect(card).to_have_attribute("data-state", "waiting")
    await expect(card.locator(".tool-args")).to_contain_text("wipe the cache")
    await card.locator("button.approve").click()
    await expect(card).to_have_attribute("data-state", "done", timeout=15_000)
    await expect(page.locator(".msg.assistant").last).to_contain_text("wiped wipe the cache", timeout=15_000)


async def test_the_chat_follows_a_turn_another_client_started(browser: Any, app_server: Any) -> None:
    from playwright.async_api import expect

    page = await browser.new_page()
    await page.goto(app_server.base_url + "/")
    await _turn(page, "adder", "from the page")
    async with httpx.AsyncClient(base_url=app_server.base_url) as api:
        thread_id = (await api.get("/api/threads")).json()["threads"][0]["id"]
        done = await api.post(f"/api/threads/{thread_id}/messages?wait=true", json={"content": "from the API"})
        assert done.status_code == 200, done.text
        messages = (await api.get(f"/api/threads/{thread_id}/messages")).json()["messages"]
    await expect(page.locator(".msg.user")).to_have_text(["from the page", "from the API"])
    await expect(page.locator(".tool-card")).to_have_count(sum(len(m["tool_calls"] or []) for m in messages))
    await expect(page.locator(".msg.assistant")).to_have_count(
        sum(1 for m in messages if m["role"] == "assistant" and m["content"]))


async def test_tool_calls_of_one_step_are_drawn_side_by_side(browser: Any, app_server: Any) -> None:
    from playwright.async_api import expect

    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    await page.goto(app_server.base_url + "/")
    await _turn(page, "twin", "add and multiply")
    await expect(page.locator(".tool-card")).to_have_count(2)
    await page.click("#inspector-toggle")
    turn = page.locator("#inspector .turn")
    await expect(turn.locator(".bar.tool")).to_have_count(2)
    async with httpx.AsyncClient(base_url=app_server.base_url) as api:
        thread_id = (await api.get("/api/threads")).json()["threads"][0]["id"]
        listed = (await api.get(f"/api/threads/{thread_id}/executions")).json()["executions"]
        steps = (await api.get(f"/api/executions/{listed[0]['id']}")).json()["steps"]
    span = steps[0]["latencyMs"] + max(c["durationMs"] for c in steps[0]["toolCalls"]) + \
        sum(s["latencyMs"] + max([c["durationMs"] for c in s["toolCalls"]] or [0]) for s in steps[1:])
    # the page draws a turn shorter than a millisecond on a 1 ms axis (the offline model is that fast)
    expected = steps[0]["latencyMs"] / max(span, 1) * 100
    # the inspector may still be drawing an earlier read of the turn: wait until it shows the
    # finished turn the API served (same execution), then both tool bars start where the
    # model call that asked for them ended
    await expect(turn).to_have_attribute("data-execution-id", listed[0]["id"])
    await page.wait_for_function(
        """([expected]) => {
            const bars = [...document.querySelectorAll("#inspector .turn .bar.tool")];
            return bars.length === 2 && bars.every(e => Math.abs(parseFloat(e.style.left) - expected) < 1e-3);
        }""", arg=[expected], timeout=15_000)
    starts = await turn.locator(".bar.tool").evaluate_all("els => els.map(e => parseFloat(e.style.left))")
    assert starts == pytest.approx([expected] * 2, abs=1e-3)
    names = await turn.locator(".row.tool .row-label").all_inner_texts()
    assert sorted(names) == ["↳ add", "↳ mul"]
    await shot(page, "inspector-parallel")


async def test_runtime_view_lists_the_agents_their_tools_and_a_waiting_call(browser: Any, app_server: Any) -> None:
    from playwright.async_api import expect

    page = await browser.new_page()
    await page.goto(app_server.base_url + "/")
    await _send(page, "guard", "wipe the disk")
    await expect(page.locator(".tool-card")).to_have_attribute("data-state", "waiting", timeout=15_000)
    await page.click("#runtime-toggle")
    view = page.locator("#runtime-view")
    await expect(view).to_be_visible()
    guard = view.locator('.runtime-agent[data-agent="guard"]')
    await expect(guard.locator('.runtime-tool[data-tool="wipe"]')).to_contain_text("needs approval")
    await expect(guard.locator(".runtime-prompt")).to_have_text("x")
    adder = view.locator('.runtime-agent[data-agent="adder"]')
    await expect(adder.locator('.runtime-tool[data-tool="add"]')).to_contain_text("code")
    await expect(adder).to_contain_text("model priced (test offline)")
    approvals = view.locator('[data-section="approvals"] .runtime-approval')
    await expect(approvals).to_have_count(1)
    await expect(approvals).to_contain_text("wipe the disk")
    await shot(page, "runtime-view")
    await page.click("#runtime-close")
    await expect(view).to_be_hidden()
