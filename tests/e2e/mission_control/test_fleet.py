"""The fleet page, live: sandboxes the official SDK makes and ends show within a second,
bulk pause, the kill switch behind its confirmation, and team scoping."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from bac_process import ServerProcess
from conftest import sign_in
from e2b import Sandbox
from playwright.sync_api import Locator, Page, expect

pytestmark = [pytest.mark.root, pytest.mark.browser]

Opts = Callable[[int], dict[str, str]]


@pytest.fixture
def made(e2b_opts: Opts) -> Iterator[Callable[..., list[Sandbox]]]:
    """Make sandboxes with the official SDK; whatever a test leaves is killed after it."""
    everything: list[Sandbox] = []

    def make(count: int = 1, team: int = 0, **metadata: str) -> list[Sandbox]:
        with ThreadPoolExecutor(count) as pool:
            found = list(pool.map(lambda _: Sandbox.create(
                timeout=300, metadata=metadata or None, **e2b_opts(team)), range(count)))
        everything.extend(found)
        return found

    yield make
    for sbx in everything:
        try:
            sbx.kill()
        except Exception:  # already ended by the test
            pass


def _live(page: Page) -> None:
    """Wait until the page's event stream is open (changes from now on are told)."""
    expect(page.locator("#live.on")).to_be_visible()


def _shows_in_order(rows: Locator, ids: list[str]) -> None:
    """Wait until the table's rows are these sandboxes in this order (a click on a sort or
    a page re-renders the rows after the totals may already read right)."""
    expect(rows).to_have_count(len(ids))
    for i, sandbox_id in enumerate(ids):
        expect(rows.nth(i)).to_have_attribute("data-id", sandbox_id)


def test_a_new_sandbox_shows_within_a_second_and_goes_when_killed(
        server: ServerProcess, page: Page, made: Callable[..., list[Sandbox]],
        shot: Callable[[Page, str], Path]) -> None:
    sign_in(page, server.url, server.keys[0])
    _live(page)
    [sbx] = made(run_id="r-fleet", owner="ada")
    row = page.locator(f"#row-{sbx.sandbox_id}")
    expect(row).to_be_visible(timeout=1000)
    expect(row.locator(".state")).to_have_text("running")
    expect(row.locator(".chip")).to_have_text(["owner=ada", "run_id=r-fleet"])
    expect(row.locator(".key")).to_have_text("tests")  # the name of the key that made it
    expect(row.locator(".state")).to_have_text("running")
    shot(page, "fleet")
    sbx.kill()
    expect(row).to_have_count(0, timeout=1000)
    assert page.csp_errors == []  # type: ignore[attr-defined]


def test_bulk_pause_of_five(server: ServerProcess, page: Page,
                            made: Callable[..., list[Sandbox]],
                            shot: Callable[[Page, str], Path]) -> None:
    sandboxes = made(5, batch="b5")
    sign_in(page, server.url, server.keys[0])
    page.fill("#f-metadata", "batch=b5")
    page.click("#filters button[type=submit]")
    _live(page)
    for sbx in sandboxes:
        page.check(f"#row-{sbx.sandbox_id} input.pick")
    page.click("#bulk-pause")
    expect(page.locator("#flash")).to_contain_text("paused 5", timeout=60_000)
    for sbx in sandboxes:
        expect(page.locator(f"#row-{sbx.sandbox_id} .state")).to_have_text("paused")
    expect(page.locator("#t-paused")).to_have_text("5")
    shot(page, "fleet-bulk-paused")
    for sbx in sandboxes:
        assert Sandbox.get_info(sbx.sandbox_id, api_key=server.keys[0],
                                api_url=server.url).state.value == "paused"


def test_another_team_sees_nothing_and_gets_404(server: ServerProcess, page: Page,
                                                made: Callable[..., list[Sandbox]],
                                                shot: Callable[[Page, str], Path]) -> None:
    """Team beta's session: alpha's sandbox is in no listing, its page and every action
    on it are 404s, and it keeps running."""
    [sbx] = made(secret="alpha-only")
    sign_in(page, server.url, server.keys[1])
    expect(page.locator("#who")).to_have_text("team beta")
    expect(page.locator("#fleet-body tr.empty")).to_be_visible()
    expect(page.locator(f"#row-{sbx.sandbox_id}")).to_have_count(0)
    assert sbx.sandbox_id not in page.content()
    rows = page.request.get(server.url + "/ui/fleet/rows")
    assert rows.ok and sbx.sandbox_id not in rows.text()
    csrf = page.locator("body").get_attribute("data-csrf")
    assert page.request.get(f"{server.url}/ui/sandboxes/{sbx.sandbox_id}").status == 404
    for action in ("pause", "kill", "extend", "resume"):
        answer = page.request.post(f"{server.url}/ui/sandboxes/{sbx.sandbox_id}/{action}",
                                   form={"csrf": csrf})
        assert answer.status == 404, action
    bulk = page.request.post(f"{server.url}/ui/fleet/actions",
                             form={"csrf": csrf, "action": "kill", "ids": sbx.sandbox_id})
    assert bulk.status == 404
    switch = page.request.post(f"{server.url}/ui/fleet/switch",
                               form={"csrf": csrf, "action": "kill", "confirm": "yes"})
    assert switch.status == 403
    shot(page, "fleet-other-team")
    assert sbx.is_running()


def test_the_kill_switch_asks_first(server: ServerProcess, page: Page, admin_token: str,
                                    made: Callable[..., list[Sandbox]],
                                    shot: Callable[[Page, str], Path]) -> None:
    """The operator sees every team; pausing a team's sandboxes takes a confirmation that
    says how many, then holds them paused; release lets them be resumed."""
    [ours] = made(team=1, switch="yes")
    sign_in(page, server.url, admin_token)
    expect(page.locator(f"#row-{ours.sandbox_id}")).to_be_visible()
    team_id = page.locator("#switch-team option", has_text="beta").get_attribute("value")
    assert team_id
    page.select_option("#switch-team", team_id)
    page.click("#switch-pause")
    expect(page.locator("#switch-confirmation")).to_contain_text("Pause 1 sandbox")
    shot(page, "fleet-kill-switch")
    assert ours.is_running()
    started = time.monotonic()
    page.click("#switch-confirm-yes")
    expect(page.locator("#switch-confirm")).to_contain_text("kill switch: pause 1")
    expect(page.locator(f"#row-{ours.sandbox_id} .held")).to_be_visible(timeout=1000)
    assert time.monotonic() - started < 30
    page.click("#switch-release")
    page.click("#switch-confirm-yes")
    expect(page.locator("#switch-confirm")).to_contain_text("kill switch: release 1")
    expect(page.locator(f"#row-{ours.sandbox_id} .held")).to_have_count(0)


def test_a_row_shows_processes_and_open_ports_as_links(
        server: ServerProcess, page: Page, made: Callable[..., list[Sandbox]],
        shot: Callable[[Page, str], Path]) -> None:
    """A server started inside shows up as a port (a link to it through the gateway) and
    the process count counts it, at the next sample (every 5 s, the page every 5 s)."""
    sign_in(page, server.url, server.keys[0])
    [sbx] = made()
    sbx.commands.run("python3 -m http.server 8080 --bind 0.0.0.0", background=True, timeout=0)
    sbx.commands.run("python3 -m http.server 8081 --bind 127.0.0.1", background=True,
                     timeout=0)
    row = page.locator(f"#row-{sbx.sandbox_id}")
    link = row.locator(".ports a")
    expect(link).to_have_text(["8080"], timeout=15_000)  # loopback-only 8081 is not listed
    host = f"8080-{sbx.sandbox_id}."
    assert host in (link.get_attribute("href") or "")
    assert int(row.locator(".procs").inner_text()) >= 3  # envd (2 processes) and the server
    shot(page, "fleet-ports")


def test_a_row_shows_egress_bytes_and_last_destinations(
        server: ServerProcess, page: Page, e2b_opts: Opts,
        shot: Callable[[Page, str], Path]) -> None:
    """A name the sandbox looked up shows in its row (refused ones struck through), with
    the bytes it sent and received, at the next sample."""
    sign_in(page, server.url, server.keys[0])
    with Sandbox.create(timeout=300, allow_internet_access=False, **e2b_opts(0)) as sbx:
        looked = sbx.commands.run("getent hosts refused.example; echo $?")
        assert looked.stdout.strip().endswith("2")  # no such name for it: refused
        row = page.locator(f"#row-{sbx.sandbox_id}")
        expect(row.locator(".dest .blocked")).to_have_text(["refused.example"],
                                                            timeout=15_000)
        sent, received = (part.strip() for part in
                          row.locator(".egress span").first.inner_text().split("/"))
        assert sent != "0 B" and received != "0 B", (sent, received)
        page.click("a.sort[data-sort=egress]")
        expect(page.locator("a.sort.on")).to_have_attribute("data-sort", "egress")
        shot(page, "fleet-egress")


def test_the_fleet_is_paged_and_a_page_follows_the_fleet(
        server: ServerProcess, page: Page, made: Callable[..., list[Sandbox]],
        shot: Callable[[Page, str], Path]) -> None:
    """Twelve sandboxes at ten a page: the totals count all twelve, the second page holds
    the last two in the sort's order; when they end, the page still shown clamps to the
    last one there is. A page size the table does not offer is a 400."""
    sandboxes = made(12, batch="p12")
    ids = sorted(s.sandbox_id for s in sandboxes)
    sign_in(page, server.url, server.keys[0])
    page.fill("#f-metadata", "batch=p12")
    page.click("#filters button[type=submit]")
    _live(page)
    page.select_option("#f-per", "10")
    page.click("a.sort[data-sort=id]")  # ascending by id
    rows = page.locator("#fleet-body tr[data-id]")
    expect(page.locator("#page-range")).to_have_text("1\u201310 of 12")
    _shows_in_order(rows, ids[:10])
    expect(page.locator("#page-prev")).to_be_disabled()
    page.click("#page-next")
    expect(page.locator("#page-range")).to_have_text("11\u201312 of 12")
    _shows_in_order(rows, ids[10:])
    expect(page.locator("#page-next")).to_be_disabled()
    shot(page, "fleet-page-2")
    for sbx in sandboxes:
        if sbx.sandbox_id in ids[10:]:
            sbx.kill()
    expect(page.locator("#page-range")).to_have_text("1\u201310 of 10", timeout=5000)
    expect(rows).to_have_count(10)
    assert page.request.get(f"{server.url}/ui/fleet/rows?per=7").status == 400
    assert page.request.get(f"{server.url}/ui/fleet/rows?page=0").status == 400
