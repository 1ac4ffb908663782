"""What a browser downloads to run each page: the JavaScript of every Mission Control page
(fleet, a sandbox's tabs, runs, templates, sign-in) stays within 300 KB compressed, the
bound the issue sets, measured on what the browser actually fetched."""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterator

import pytest
from bac_process import ServerProcess
from conftest import sign_in
from e2b import Sandbox
from playwright.sync_api import Page, Response

pytestmark = [pytest.mark.root, pytest.mark.browser]

BOUND = 300 * 1024


@pytest.fixture
def sbx(e2b_opts: Callable[[int], dict[str, str]]) -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=300, **e2b_opts(0))
    yield sandbox
    sandbox.kill()


def _script_bytes(page: Page, url: str) -> int:
    """The gzip-compressed size of every script the page loaded."""
    scripts: list[Response] = []
    listener = lambda r: scripts.append(r) if r.request.resource_type == "script" else None  # noqa: E731
    page.on("response", listener)
    try:
        page.goto(url)
        page.wait_for_load_state("networkidle")
    finally:
        page.remove_listener("response", listener)
    return sum(len(gzip.compress(r.body(), 9)) for r in scripts if r.ok)


def test_every_page_ships_at_most_300_kb_of_compressed_javascript(
        server: ServerProcess, page: Page, sbx: Sandbox) -> None:
    sign_in(page, server.url, server.keys[0])
    pages = [f"{server.url}/ui/fleet", f"{server.url}/ui/runs", f"{server.url}/ui/templates"]
    pages += [f"{server.url}/ui/sandboxes/{sbx.sandbox_id}?tab={tab}"
              for tab in ("trace", "terminal", "metrics", "files", "network", "checkpoints")]
    weights = {url.rsplit("/", 1)[-1]: _script_bytes(page, url) for url in pages}
    assert all(w > 0 for w in weights.values()), weights  # each page did load scripts
    heavy = {name: w for name, w in weights.items() if w > BOUND}
    assert not heavy, f"pages over {BOUND} bytes of compressed JS: {heavy}"
