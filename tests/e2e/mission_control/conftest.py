"""Mission Control in a real browser: Debian's Chromium driven by Playwright, against a real
server (``bac serve`` in a child process) with real sandboxes made by the official SDK.

A server and a browser per module (the server with the operator's token and two teams,
alpha and beta), a fresh browser context (cookies) per test. Module-scoped, not
session-scoped: Playwright's sync API keeps an event loop of its own while it runs, which
the async tests after this directory must not find, and nothing of it outlives the
directory. Screenshots go to ``$BAC_ARTEFACTS`` (default
``/tmp/bac-artefacts/mission-control``) for a person to look at.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "compat"))

from bac_process import ServerProcess, running
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

CHROMIUM = "/usr/bin/chromium"
ARTEFACTS = Path(os.environ.get("BAC_ARTEFACTS", "/tmp/bac-artefacts")) / "mission-control"
# Everything a page shows is asserted with a bound; live updates must come within 1 s.
expect.set_options(timeout=10_000)


@pytest.fixture(scope="module")
def admin_token() -> str:
    return secrets.token_hex(32)


@pytest.fixture(scope="module")
def server(admin_token: str) -> Iterator[ServerProcess]:
    with running("mission-control", BAC_ADMIN_TOKEN=admin_token) as srv:
        srv.create_key("alpha")
        srv.create_key("beta")
        yield srv


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (scripts/setup-host.sh installs chromium)")
    with sync_playwright() as playwright:
        found = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"])
        yield found
        found.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    yield ctx
    ctx.close()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    found = context.new_page()
    errors: list[str] = []
    # A script the Content-Security-Policy blocks, or one that throws, fails the test.
    found.on("pageerror", lambda exc: errors.append(str(exc)))
    found.on("console", lambda msg: errors.append(msg.text) if msg.type == "error"
             and "Content Security Policy" in msg.text else None)
    found.csp_errors = errors  # type: ignore[attr-defined]
    return found


@pytest.fixture
def shot() -> Callable[[Page, str], Path]:
    ARTEFACTS.mkdir(parents=True, exist_ok=True)

    def take(page: Page, name: str) -> Path:
        path = ARTEFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


def sign_in(page: Page, base: str, credential: str) -> None:
    page.goto(base + "/ui/")
    page.fill("#credential", credential)
    page.click("#signin")
    expect(page.locator("#who")).to_be_visible()


@pytest.fixture
def e2b_opts(server: ServerProcess) -> Callable[[int], dict[str, str]]:
    """The official SDK's connection options for a team (its traffic through the gateway)."""
    def opts(team: int = 0) -> dict[str, str]:
        return {"api_url": server.url, "sandbox_url": server.url, "api_key": server.keys[team]}

    return opts
