"""Signing in and out of Mission Control, and what guards every page: the session cookie's
flags, the CSRF token, the Content-Security-Policy, keys never in a URL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from bac_process import ServerProcess
from conftest import sign_in
from playwright.sync_api import BrowserContext, Page, expect

pytestmark = [pytest.mark.root, pytest.mark.browser]


def test_root_redirects_a_browser_and_keeps_the_api_404(server: ServerProcess) -> None:
    """A browser asking for / is sent to /ui/; an API client still gets the JSON 404."""
    browser = httpx.get(server.url + "/", headers={"Accept": "text/html"})
    assert browser.status_code == 302 and browser.headers["location"] == "/ui/"
    api = httpx.get(server.url + "/")
    assert api.status_code == 404 and api.json() == {"code": 404, "message": "Not Found"}
    assert httpx.post(server.url + "/").status_code == 404


def test_sign_in_with_a_key_then_sign_out(server: ServerProcess, context: BrowserContext,
                                          page: Page, shot: Callable[[Page, str], Path]) -> None:
    """A team's key signs in (HttpOnly, SameSite=Strict cookie; the key in no URL), the
    pages carry a strict CSP, and signing out ends the session on the server."""
    urls: list[str] = []
    page.on("request", lambda request: urls.append(request.url))
    page.goto(server.url + "/")
    expect(page).to_have_url(server.url + "/ui/signin")
    shot(page, "signin")
    page.fill("#credential", server.keys[0])
    page.click("#signin")
    expect(page.locator("#who")).to_have_text("team alpha")
    expect(page).to_have_url(server.url + "/ui/fleet")
    shot(page, "fleet-empty")

    cookie = next(c for c in context.cookies() if c["name"] == "bac_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"
    assert not any(server.keys[0] in url for url in urls)
    answer = page.request.get(server.url + "/ui/fleet")
    csp = answer.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp
    assert page.csp_errors == []  # type: ignore[attr-defined]

    page.click("#signout")
    expect(page).to_have_url(server.url + "/ui/signin")
    # The old cookie, sent again by hand, opens nothing: the session ended on the server.
    stale = httpx.get(server.url + "/ui/fleet", cookies={"bac_session": cookie["value"]},
                      headers={"Accept": "text/html"})
    assert stale.status_code == 303 and stale.headers["location"] == "/ui/signin"


def test_a_wrong_credential_is_refused(server: ServerProcess, page: Page) -> None:
    page.goto(server.url + "/ui/signin")
    page.fill("#credential", "e2b_" + "0" * 40)
    page.click("#signin")
    expect(page.locator(".error")).to_contain_text("not a valid API key")
    assert page.context.cookies() == [] or all(
        c["name"] != "bac_session" for c in page.context.cookies())


def test_the_operator_signs_in_with_the_admin_token(server: ServerProcess, page: Page,
                                                     admin_token: str) -> None:
    sign_in(page, server.url, admin_token)
    expect(page.locator("#who")).to_have_text("operator")
    expect(page.locator("#switch-pause")).to_be_visible()


def test_a_change_without_the_csrf_token_is_refused(server: ServerProcess,
                                                    page: Page) -> None:
    """A signed-in browser's POST without the session's CSRF token (or with another one)
    changes nothing: 403, and the session is still there."""
    sign_in(page, server.url, server.keys[0])
    refused = page.request.post(server.url + "/ui/signout", form={"x": "1"})
    assert refused.status == 403 and "CSRF" in refused.text()
    wrong = page.request.post(server.url + "/ui/signout", form={"csrf": "nope"})
    assert wrong.status == 403
    foreign = page.request.post(server.url + "/ui/signout",
                                form={"csrf": page.locator("body").get_attribute("data-csrf")},
                                headers={"Origin": "http://evil.example"})
    assert foreign.status == 403
    page.reload()
    expect(page.locator("#who")).to_have_text("team alpha")
    # The sign-in form itself needs its double-submit token.
    bare = httpx.post(server.url + "/ui/signin", data={"credential": server.keys[0]})
    assert bare.status_code == 403
