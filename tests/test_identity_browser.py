"""The web app signs in through an identity provider (authorization code with PKCE): a local
OIDC provider over HTTP, the server trusting its tokens, and Debian's headless Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from server_fixtures import LiveServer, serve_app, write_project
from standardagents.testing.oidc import OidcProvider
from test_server_browser import ARGS, chromium

__all__ = ["chromium"]

pytestmark = pytest.mark.browser

AUDIENCE = "sa-api"


@pytest.fixture
def idp(monkeypatch: pytest.MonkeyPatch) -> Iterator[OidcProvider]:
    with OidcProvider(audience=AUDIENCE, client_id="sa-web") as provider:
        provider.user = {"sub": "alice", "name": "Alice", "tenant": "acme"}
        monkeypatch.setenv("STANDARDAGENTS_AUTH_ISSUER", provider.issuer)
        monkeypatch.setenv("STANDARDAGENTS_AUTH_AUDIENCE", AUDIENCE)
        monkeypatch.setenv("STANDARDAGENTS_AUTH_CLIENT_ID", "sa-web")
        yield provider


@pytest.fixture
def live(idp: OidcProvider, tmp_path: Path) -> Iterator[LiveServer]:
    project = write_project(tmp_path / "project")
    yield from serve_app(project, f"sqlite+aiosqlite:///{tmp_path / 'live.db'}")


async def test_the_web_app_signs_in_through_the_provider_with_pkce(chromium: str, live: LiveServer,
                                                                   idp: OidcProvider) -> None:
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=15_000)
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
        try:
            page = await browser.new_page()
            await page.goto(live.base_url + "/")
            button = page.locator("#sign-in")
            await expect(button).to_be_visible()
            await expect(page.locator("#agent-select option")).to_have_count(0)  # no token yet: 401s
            await button.click()
            await expect(page.locator("#signed-in")).to_have_text("Signed in as Alice")
            await expect(page.locator("#agent-select option")).to_have_text(["helper"])
            assert page.url == live.base_url + "/"  # the code and state are gone from the address
            await page.fill("#input", "please add two numbers")
            await page.click("#send")
            await expect(page.locator(".msg.user")).to_have_text("please add two numbers")
            await expect(page.locator(".msg.assistant").last).not_to_be_empty()
        finally:
            await browser.close()
    [exchange] = idp.token_requests
    assert exchange["client_id"] == "sa-web"
    assert exchange["redirect_uri"] == live.base_url + "/"
    assert len(exchange["code_verifier"]) >= 43
    assert live.runtime is not None
    threads = await live.runtime.store.list_threads(user_id="alice")
    assert [(t.user_id, t.metadata.get("tenant")) for t in threads] == [("alice", "acme")]


async def test_without_a_provider_the_web_app_offers_no_sign_in(chromium: str, tmp_path: Path) -> None:
    from playwright.async_api import async_playwright, expect

    project = write_project(tmp_path / "project")
    for server in serve_app(project, f"sqlite+aiosqlite:///{tmp_path / 'dev.db'}", dev=True):
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
            try:
                page = await browser.new_page()
                await page.goto(server.base_url + "/")
                await expect(page.locator("#agent-select option")).to_have_text(["helper"])
                await expect(page.locator("#sign-in")).to_be_hidden()
            finally:
                await browser.close()


