"""Runs (sandboxes grouped by a metadata key) and Templates, scoped to the viewer's team."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from bac_process import ServerProcess
from conftest import sign_in
from e2b import Sandbox
from playwright.sync_api import Page, expect

pytestmark = [pytest.mark.root, pytest.mark.browser]


@pytest.fixture
def run_sandboxes(e2b_opts: Callable[[int], dict[str, str]]) -> Iterator[list[Sandbox]]:
    made = [Sandbox.create(timeout=300, metadata={"job": job}, **e2b_opts(0))
            for job in ("j-one", "j-one", "j-two")]
    yield made
    for sbx in made:
        sbx.kill()


def test_runs_group_by_the_chosen_key(server: ServerProcess, page: Page,
                                      run_sandboxes: list[Sandbox],
                                      shot: Callable[[Page, str], Path]) -> None:
    run_sandboxes[2].pause()
    sign_in(page, server.url, server.keys[0])
    page.goto(server.url + "/ui/runs")
    page.fill("#run-key", "job")
    page.click("form.filters button")
    one = page.locator("#runs tr[data-run=j-one]")
    expect(one.locator("td").nth(1)).to_have_text("running")
    expect(one.locator("td").nth(2)).to_have_text("2")
    two = page.locator("#runs tr[data-run=j-two]")
    expect(two.locator("td").nth(1)).to_have_text("paused")
    shot(page, "runs")
    one.locator("a", has_text="sandboxes").click()
    expect(page.locator("#fleet-body tr[data-id]")).to_have_count(2)


def test_another_team_sees_no_runs_of_ours(server: ServerProcess, page: Page,
                                           run_sandboxes: list[Sandbox]) -> None:
    sign_in(page, server.url, server.keys[1])
    page.goto(server.url + "/ui/runs?key=job")
    expect(page.locator("#runs tr.empty")).to_be_visible()
    assert "j-one" not in page.content()


def test_templates_lists_the_built_ins(server: ServerProcess, page: Page,
                                       shot: Callable[[Page, str], Path]) -> None:
    sign_in(page, server.url, server.keys[0])
    page.click("text=Templates")
    expect(page.locator("#builtins")).to_contain_text("base")
    shot(page, "templates")
    missing = page.request.get(server.url + "/ui/templates/nope/builds/nope")
    assert missing.status == 404
    bad = page.request.get(server.url + "/ui/runs?key=" + "a%20b")
    assert bad.status == 400


def test_a_builds_log_is_followed_live(server: ServerProcess, page: Page, tmp_path: Path,
                                       shot: Callable[[Page, str], Path]) -> None:
    """A build's page opened while it runs shows its lines as the server writes them and
    its status turning ready, without a reload."""
    import threading

    import bac

    (tmp_path / "Dockerfile").write_text(
        "FROM base\nRUN for i in 1 2 3 4 5 6; do echo tick-$i; sleep 1; done\n")
    recipe = bac.Template.from_dockerfile(tmp_path / "Dockerfile")
    done: list[object] = []

    def build() -> None:
        with bac.Templates(api_key=server.keys[0], api_url=server.url) as templates:
            done.append(templates.build(recipe, "live-log", skip_cache=True))

    builder = threading.Thread(target=build)
    builder.start()
    try:
        sign_in(page, server.url, server.keys[0])
        link = page.locator("a[href*='/builds/']", has_text="")
        for _ in range(100):  # until the build is listed (it is made within a second)
            page.goto(server.url + "/ui/templates")
            if link.count():
                break
            page.wait_for_timeout(100)
        link.first.click()
        expect(page.locator("#build-poll")).to_contain_text("following")
        # The click's own navigation ends with its load event (after the text shows, once
        # the page's assets are in): counted from then on, a load is a reload.
        page.wait_for_load_state("load")
        reloads: list[str] = []
        page.on("load", lambda _: reloads.append("load"))
        expect(page.locator("#build-log")).to_contain_text("tick-6", timeout=60_000)
        expect(page.locator("#build-status")).to_have_text("ready", timeout=60_000)
        expect(page.locator("#build-poll")).not_to_contain_text("following")
        assert reloads == []  # the lines came without the page being loaded again
        text = page.locator("#build-log").inner_text()
        assert text.count("tick-3") == 1  # each line once, in order
        assert text.index("tick-1") < text.index("tick-6")
        shot(page, "build-live")
        assert page.csp_errors == []  # type: ignore[attr-defined]
    finally:
        builder.join(120)
    assert done, "the build did not finish"
