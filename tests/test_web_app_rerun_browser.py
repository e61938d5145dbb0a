"""The inspector's re-run, in Debian's headless Chromium: a step re-run with another model and
an edited system prompt opens a new branch whose step shows the other model (and the model
stub received that model and prompt), with a link back to the thread it came from, which is
unchanged; a step's hooks and guardrails in its detail; a turn's trace id as a link when a
trace URL template is set, else as text with a copy button. A user who is not an admin, on a
server that is not a dev server, sees no model or prompt to choose and re-runs the step as it
was, unless the agent allows overrides. Screenshots go to ``tests/screenshots/``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider

from server_fixtures import serve_app, write_project
from standardagents import observability
from standardagents.server.traces import TRACE_URL_ENV
from standardagents.testing.openai_stub import OpenAIStub, StubReply
from test_server_browser import ARGS, chromium

__all__ = ["chromium"]

pytestmark = pytest.mark.browser

SHOTS = Path(__file__).parent / "screenshots"
TEMPLATE = "http://localhost:16686/trace/{trace_id}"


def _model(name: str, model: str, stub: OpenAIStub) -> str:
    return (f"from standardagents import define_model\n"
            f"{name} = define_model(name={name!r}, provider='openai', model={model!r},\n"
            f"                      base_url={stub.base_url!r}, max_retries=0)\n")


def _files(stub: OpenAIStub) -> dict[str, str]:
    return {
        "agents/agents/writer.py": """
            from standardagents import define_agent
            writer = define_agent(name="writer", side_a={"prompt": "writer_prompt", "stop_on_response": True},
                                  output_guardrails=["no_secrets"])
        """,
        "agents/prompts/writer_prompt.py": """
            from standardagents import define_prompt
            writer_prompt = define_prompt(name="writer_prompt", prompt="You write one line.", model="first",
                                          hooks=["sign"])
        """,
        "agents/hooks/sign.py": """
            from standardagents import define_hook

            @define_hook("after_system_message", id="sign")
            def sign(state, system):
                return system + " Sign it."
        """,
        "agents/tools/no_secrets.py": """
            from standardagents import define_tool

            @define_tool(guardrail=True)
            def no_secrets(text: str) -> dict:
                '''Trip on a password.'''
                return {"tripwire": "password" in text.lower()}
        """,
        "agents/models/first.py": _model("first", "first-model", stub),
        "agents/models/second.py": _model("second", "second-model", stub),
    }


@pytest.fixture
def traced_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, OpenAIStub]]:
    """A dev server whose turns are traced (so they have trace ids), with a trace URL template set;
    the stub answers each model by name."""
    monkeypatch.setenv(TRACE_URL_ENV, TEMPLATE)
    observability.set_tracer_provider(TracerProvider())
    try:
        with OpenAIStub(lambda body: StubReply(text=f"A line from {body['model']}.", chunk_size=8)) as stub:
            project = write_project(tmp_path / "project", _files(stub))
            for server in serve_app(project, f"sqlite+aiosqlite:///{tmp_path / 'rerun.db'}", dev=True):
                yield server, stub
    finally:
        observability.set_tracer_provider(None)


@pytest.fixture
async def page(chromium: str, traced_server: Any) -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=15_000)  # the machine may be busy
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
        try:
            yield await browser.new_page(viewport={"width": 1400, "height": 900})
        finally:
            await browser.close()


async def _first_turn(page: Any, base_url: str) -> None:
    from playwright.async_api import expect

    await page.goto(base_url + "/")
    await page.select_option("#agent-select", "writer")
    await page.fill("#input", "Write about tea.")
    await page.press("#input", "Enter")
    await expect(page.locator(".turn-usage")).to_have_count(1)
    await expect(page.locator("#stop")).to_be_disabled()
    await page.click("#inspector-toggle")
    await expect(page.locator("#inspector .bar.model")).to_have_count(1)


async def test_a_rerun_from_the_inspector_opens_a_branch_that_ran_the_other_model(
        page: Any, traced_server: Any) -> None:
    from playwright.async_api import expect

    server, stub = traced_server
    await _first_turn(page, server.base_url)
    original = page.locator("#thread-title")
    source_title = await original.inner_text()
    await expect(page.locator("#inspector .row-label").first).to_have_text("first")
    await page.locator("#inspector .bar.model").first.click()
    detail = page.locator("#inspector-detail")
    # the step's hooks and guardrails are in its detail
    hook = detail.locator(".checks .hook")
    await expect(hook).to_have_count(1)
    await expect(hook).to_have_attribute("data-outcome", "changed")
    await expect(hook).to_contain_text("sign")
    await expect(hook).to_contain_text("after_system_message")
    await expect(detail.locator(".checks .guardrail")).to_have_text(["no_secretsoutputpassed"])
    await detail.get_by_role("button", name="Re-run step 1 with another model or prompt").click()
    dialog = page.locator("#rerun-dialog")
    await expect(dialog).to_be_visible()
    await expect(page.locator("#rerun-system")).to_have_value("You write one line.")
    await page.select_option("#rerun-model", "second")
    await page.fill("#rerun-system", "You write one line as a haiku.")
    SHOTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(SHOTS / "rerun-dialog.png"))
    await page.click("#rerun-run")
    await expect(dialog).to_be_hidden()
    # the branch is open: its own title, a link back, and the reply of the other model
    await expect(original).to_have_text(f"{source_title} (re-run of step 1)")
    banner = page.locator("#branch-of")
    await expect(banner).to_have_text(f"Re-run of step 1 of {source_title} with model second and an edited system prompt")
    await expect(page.locator(".msg.assistant")).to_have_text(["A line from second-model."])
    await expect(page.locator(".msg.user")).to_have_count(1)
    turns = page.locator("#inspector .turn")
    await expect(turns).to_have_count(1)
    await expect(turns.first.locator(".row-label")).to_have_text(["second"])
    await expect(turns.first.locator(".override")).to_have_text("ran with model second and its own system prompt")
    sent = stub.requests[-1]
    assert sent["model"] == "second-model"
    assert sent["messages"][0]["content"] == "You write one line as a haiku. Sign it."
    assert [m["content"] for m in sent["messages"][1:]] == ["Write about tea."]
    # the branch's trace id links to the tracing UI
    async with httpx.AsyncClient(base_url=server.base_url) as api:
        threads = (await api.get("/api/threads")).json()["threads"]
        branch = next(t for t in threads if t["metadata"].get("rerunOf"))
        (run,) = (await api.get(f"/api/threads/{branch['id']}/executions")).json()["executions"]
        trace_id = (await api.get(f"/api/executions/{run['id']}")).json()["traceId"]
    assert trace_id
    link = turns.first.locator("a.trace")
    await expect(link).to_have_attribute("href", TEMPLATE.replace("{trace_id}", trace_id))
    await page.screenshot(path=str(SHOTS / "rerun-branch.png"))
    # back to the original thread: as it was, its step still the first model's
    await banner.get_by_role("button", name=source_title).click()
    await expect(original).to_have_text(source_title)
    await expect(banner).to_be_hidden()
    await expect(page.locator(".msg.assistant")).to_have_text(["A line from first-model."])
    await expect(page.locator("#inspector .turn .row-label")).to_have_text(["first"])


async def test_without_a_template_the_trace_id_is_text_with_a_copy_button(
        page: Any, traced_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from playwright.async_api import expect

    server, _ = traced_server
    monkeypatch.delenv(TRACE_URL_ENV)
    await _first_turn(page, server.base_url)
    turn = page.locator("#inspector .turn").first
    await expect(turn.locator("div.trace")).to_contain_text("trace ")
    await expect(turn.locator("a.trace")).to_have_count(0)
    await expect(turn.get_by_role("button", name="Copy the trace id")).to_be_visible()


_FILES_OPEN_WRITER = {
    "agents/agents/open_writer.py": """
        from standardagents import define_agent
        open_writer = define_agent(name="open_writer", allow_overrides=True,
                                   side_a={"prompt": "writer_prompt", "stop_on_response": True})
    """,
}


@pytest.fixture
async def user_server(tmp_path: Path) -> AsyncIterator[tuple[Any, OpenAIStub, str]]:
    """A server that is not a dev server, and the API token of a user who is not an admin;
    ``writer`` keeps its model and prompt, ``open_writer`` lets its readers choose them."""
    from standardagents.store import open_store

    url = f"sqlite+aiosqlite:///{tmp_path / 'users.db'}"
    async with open_store(url) as store:
        user = await store.create_user("reader")
        _, token = await store.create_api_token(user.id, "browser")
    with OpenAIStub(lambda body: StubReply(text=f"A line from {body['model']}.", chunk_size=8)) as stub:
        project = write_project(tmp_path / "project", {**_files(stub), **_FILES_OPEN_WRITER})
        for server in serve_app(project, url):
            yield server, stub, token



@pytest.fixture
async def user_page(chromium: str, user_server: Any) -> AsyncIterator[Any]:
    """A page of the web app signed in with the plain user's token."""
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=15_000)
    _, _, token = user_server
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": 900})
            await page.add_init_script(f"localStorage.setItem('sa-token', {token!r})")
            yield page
        finally:
            await browser.close()


async def _open_rerun_of_the_first_step(page: Any, base_url: str, agent: str, label: str) -> None:
    from playwright.async_api import expect

    await page.goto(base_url + "/")
    await page.select_option("#agent-select", agent)
    await page.fill("#input", "Write about tea.")
    await page.press("#input", "Enter")
    await expect(page.locator(".turn-usage")).to_have_count(1)
    await expect(page.locator("#stop")).to_be_disabled()
    await page.click("#inspector-toggle")
    await page.locator("#inspector .bar.model").first.click()
    await page.locator("#inspector-detail").get_by_role("button", name=label).click()
    await expect(page.locator("#rerun-dialog")).to_be_visible()


async def test_a_user_who_may_not_choose_sees_no_model_or_prompt_and_reruns_the_step_as_it_was(
        user_page: Any, user_server: Any) -> None:
    from playwright.async_api import expect

    server, stub, _ = user_server
    page = user_page
    await _open_rerun_of_the_first_step(page, server.base_url, "writer", "Re-run step 1 as it was")
    for field in ("#rerun-model", "#rerun-model-name", "#rerun-system"):
        await expect(page.locator(field)).to_be_hidden()
    await expect(page.locator("#rerun-note")).to_contain_text("with the same model and system prompt")
    SHOTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(SHOTS / "rerun-dialog-as-it-was.png"))
    await page.click("#rerun-run")
    await expect(page.locator("#rerun-dialog")).to_be_hidden()
    await expect(page.locator("#branch-of")).to_contain_text("Re-run of step 1 of")
    await expect(page.locator(".msg.assistant")).to_have_text(["A line from first-model."])
    sent = stub.requests[-1]
    assert (sent["model"], sent["messages"][0]["content"]) == ("first-model", "You write one line. Sign it.")


async def test_a_user_of_an_agent_that_allows_overrides_may_choose_the_model_and_prompt(
        user_page: Any, user_server: Any) -> None:
    from playwright.async_api import expect

    server, stub, _ = user_server
    page = user_page
    await _open_rerun_of_the_first_step(page, server.base_url, "open_writer",
                                        "Re-run step 1 with another model or prompt")
    # no runtime view for a plain user: the model is named by hand, the prompt starts empty
    await expect(page.locator("#rerun-model")).to_be_hidden()
    await page.fill("#rerun-model-name", "second")
    await page.fill("#rerun-system", "You write one line as a haiku.")
    await page.click("#rerun-run")
    await expect(page.locator("#rerun-dialog")).to_be_hidden()
    await expect(page.locator(".msg.assistant")).to_have_text(["A line from second-model."])
    sent = stub.requests[-1]
    assert (sent["model"], sent["messages"][0]["content"]) == ("second-model", "You write one line as a haiku. Sign it.")
