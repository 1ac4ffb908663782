"""A sandbox's page: the trace timeline shows what the official SDK ran with its exit
code, a command typed into the terminal shows its output, files go up and down,
processes are listed and killed, the metrics chart and the cost are drawn."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from bac_process import ServerProcess
from conftest import sign_in
from e2b import CommandExitException, Sandbox
from playwright.sync_api import Locator, Page, expect

pytestmark = [pytest.mark.root, pytest.mark.browser]


@pytest.fixture
def sbx(server: ServerProcess, e2b_opts: Callable[[int], dict[str, str]]) -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=300, metadata={"run_id": "r-page"}, **e2b_opts(0))
    yield sandbox
    sandbox.kill()


def shows_after_reloads(page: Page, locator: Locator, bound_s: float = 20) -> None:
    """What the server writes in the background (trace reports are batched, samples
    taken every 0.5 s) shows after a reload: reload until it does, within a bound."""
    deadline = time.monotonic() + bound_s
    while True:
        try:
            expect(locator.first).to_be_visible(timeout=500)
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            page.reload()


def test_the_trace_shows_sdk_commands_with_exit_codes(
        server: ServerProcess, page: Page, sbx: Sandbox,
        shot: Callable[[Page, str], Path]) -> None:
    assert sbx.commands.run("echo from-the-sdk").exit_code == 0
    with pytest.raises(CommandExitException):
        sbx.commands.run("sh -c 'echo failing; exit 3'")
    sbx.files.write("/home/user/notes.txt", "kept")
    sign_in(page, server.url, server.keys[0])
    page.goto(f"{server.url}/ui/sandboxes/{sbx.sandbox_id}")
    failing = page.locator("#timeline li.k-command", has_text="exit 3")
    shows_after_reloads(page, failing)
    expect(failing).to_contain_text("echo failing")
    expect(failing.locator(".badge")).to_have_class("badge exit-bad")
    ok = page.locator("#timeline li.k-command", has_text="from-the-sdk")
    expect(ok.locator(".badge")).to_have_text("exit 0")
    expect(ok.locator("pre.tail")).to_have_text("from-the-sdk")  # its output's end
    expect(failing.locator("pre.tail")).to_have_text("failing")
    shows_after_reloads(page, page.locator("#timeline li.k-upload", has_text="notes.txt"))
    expect(page.locator("#timeline li.k-created")).to_have_count(1)
    shot(page, "sandbox-trace")
    assert page.csp_errors == []  # type: ignore[attr-defined]


def test_a_command_typed_in_the_terminal_shows_its_output(
        server: ServerProcess, page: Page, sbx: Sandbox,
        shot: Callable[[Page, str], Path]) -> None:
    sign_in(page, server.url, server.keys[0])
    page.goto(f"{server.url}/ui/sandboxes/{sbx.sandbox_id}?tab=terminal")
    expect(page.locator("#terminal[data-connected=yes]")).to_be_visible()
    page.locator("#terminal").click()
    page.keyboard.type("echo mc-$((6*7)) $(whoami)\n")
    expect(page.locator("#terminal .xterm-rows")).to_contain_text("mc-42 user")
    shot(page, "sandbox-terminal")
    assert page.csp_errors == []  # type: ignore[attr-defined]
    page.goto(f"{server.url}/ui/sandboxes/{sbx.sandbox_id}?tab=processes")
    expect(page.locator("#processes")).to_be_visible()


def test_files_processes_metrics_and_cost(server: ServerProcess, page: Page, sbx: Sandbox,
                                          tmp_path: Path,
                                          shot: Callable[[Page, str], Path]) -> None:
    sleeper = sbx.commands.run("sleep 600", background=True)
    sign_in(page, server.url, server.keys[0])
    base = f"{server.url}/ui/sandboxes/{sbx.sandbox_id}"

    page.goto(base + "?tab=processes")
    row = page.locator(f"#proc-{sleeper.pid}")
    expect(row).to_contain_text("sleep 600")
    shot(page, "sandbox-processes")
    row.locator("button").click()
    expect(page.locator("#flash")).to_contain_text(f"killed process {sleeper.pid}")
    page.reload()
    expect(page.locator(f"#proc-{sleeper.pid}")).to_have_count(0)

    local = tmp_path / "hello.txt"
    local.write_text("hello from the browser\n")
    page.goto(base + "?tab=files")
    page.set_input_files("#upload-file", str(local))
    page.click("#upload")
    expect(page.locator("#flash")).to_contain_text("uploaded /home/user/hello.txt")
    assert sbx.files.read("/home/user/hello.txt") == "hello from the browser\n"
    page.reload()
    link = page.locator("#files a", has_text="hello.txt")
    expect(link).to_be_visible()
    shot(page, "sandbox-files")
    got = page.request.get(server.url + str(link.get_attribute("href")))
    assert got.ok and got.text() == "hello from the browser\n"

    page.goto(base + "?tab=metrics")
    shows_after_reloads(page, page.locator("#chart .uplot"))
    shot(page, "sandbox-metrics")
    page.goto(base + "?tab=cost")
    expect(page.locator("#cost")).to_contain_text("vCPU-seconds")
    page.goto(base + "?tab=checkpoints")
    expect(page.locator("#checkpoints")).to_be_visible()
    assert page.csp_errors == []  # type: ignore[attr-defined]


def test_checkpoints_are_taken_restored_and_forked_from_the_page(
        server: ServerProcess, page: Page, sbx: Sandbox,
        e2b_opts: Callable[[int], dict[str, str]],
        shot: Callable[[Page, str], Path]) -> None:
    """Take a named checkpoint, change the sandbox, roll it back from its row (after a
    confirmation): the change is gone. Fork it: the new sandbox has the same files."""
    sbx.files.write("/home/user/state.txt", "before")
    sign_in(page, server.url, server.keys[0])
    page.goto(f"{server.url}/ui/sandboxes/{sbx.sandbox_id}?tab=checkpoints")
    page.fill("#checkpoint-name", "before-change")
    page.click("#checkpoint-take-button")
    expect(page.locator("#checkpoint-flash")).to_contain_text("taken (with its memory",
                                                              timeout=30_000)
    row = page.locator("#checkpoints tbody tr", has_text="before-change")
    expect(row).to_have_count(1)
    sbx.files.write("/home/user/state.txt", "after")
    page.once("dialog", lambda dialog: dialog.accept())
    row.locator("button.restore").click()
    expect(page.locator("#checkpoint-flash")).to_contain_text("rolled back", timeout=30_000)
    again = Sandbox.connect(sbx.sandbox_id, **e2b_opts(0))
    assert again.files.read("/home/user/state.txt") == "before"
    shot(page, "sandbox-checkpoints")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#fork-button")
    expect(page.locator("#checkpoint-flash")).to_contain_text("forked into", timeout=60_000)
    href = page.locator("#fork-link").get_attribute("href") or ""
    fork_id = href.rsplit("/", 1)[-1]
    assert fork_id and fork_id != sbx.sandbox_id
    fork = Sandbox.connect(fork_id, **e2b_opts(0))
    try:
        assert fork.files.read("/home/user/state.txt") == "before"
    finally:
        fork.kill()
    assert page.csp_errors == []  # type: ignore[attr-defined]


def test_the_egress_policy_is_edited_and_its_log_shown(
        server: ServerProcess, page: Page, sbx: Sandbox,
        shot: Callable[[Page, str], Path]) -> None:
    """Deny everything but one address from the network tab: a connection elsewhere is
    refused inside, and the tab's log shows it refused; a bad entry is a 400 naming it."""
    sign_in(page, server.url, server.keys[0])
    page.goto(f"{server.url}/ui/sandboxes/{sbx.sandbox_id}?tab=network")
    page.fill("#egress-allow", "192.0.2.1")
    page.fill("#egress-deny", "0.0.0.0/0")
    page.click("#egress-save")
    expect(page.locator("#network-flash")).to_have_text("egress policy replaced")
    expect(page.locator("#egress-allow")).to_have_value("192.0.2.1/32")  # normalised
    refused = sbx.commands.run(
        "python3 -c \"import socket; s = socket.socket(); s.settimeout(3); "
        "print(s.connect_ex(('198.51.100.7', 443)))\"")
    assert refused.stdout.strip() != "0"
    page.goto(f"{server.url}/ui/sandboxes/{sbx.sandbox_id}?tab=network")
    row = page.locator("#destinations tr.refused", has_text="198.51.100.7:443")
    shows_after_reloads(page, row)
    expect(row).to_contain_text("tcp")
    shot(page, "sandbox-network")
    page.fill("#egress-allow", "not a destination!")
    page.click("#egress-save")
    expect(page.locator("#flash")).to_contain_text("not a destination!")
    assert page.csp_errors == []  # type: ignore[attr-defined]


def test_the_desktop_tab_shows_the_screen_live(
        server: ServerProcess, page: Page, sbx: Sandbox,
        e2b_opts: Callable[[int], dict[str, str]],
        shot: Callable[[Page, str], Path]) -> None:
    """A desktop sandbox's tab frames noVNC from the sandbox's own origin, which connects
    through the gateway with the page's stream token and draws the screen; a sandbox
    without a desktop says so."""
    sign_in(page, server.url, server.keys[0])
    page.goto(f"{server.url}/ui/sandboxes/{sbx.sandbox_id}?tab=desktop")
    expect(page.locator("#desktop-unavailable")).to_contain_text("no desktop")
    desk = Sandbox.create("desktop", timeout=300, **e2b_opts(0))
    try:
        origin = f"6080-{desk.sandbox_id}."
        trouble: list[str] = []  # what the viewer's own requests met, for the failure
        page.on("requestfailed", lambda r: trouble.append(f"failed {r.url}: {r.failure}")
                if origin in r.url else None)
        page.on("response", lambda r: trouble.append(f"{r.status} {r.url}")
                if origin in r.url and r.status >= 400 else None)
        canvas = page.frame_locator("#desktop-viewer").locator("#screen canvas")
        # In full runs (never alone) the first viewer of a just-booted desktop has missed
        # three times; a person reloads the tab. Three tries, and what the viewer's
        # requests met if none draws (the cause is not known yet).
        for attempt in range(3):
            page.goto(f"{server.url}/ui/sandboxes/{desk.sandbox_id}?tab=desktop")
            try:
                expect(canvas).to_be_visible(timeout=20_000)
                break
            except AssertionError as exc:
                if attempt == 2:
                    raise AssertionError(f"the viewer never drew: {trouble[-20:]}") from exc
        # The viewer is another origin (the sandbox's): its frame is asked, not the page.
        [viewer] = [f for f in page.frames if f"6080-{desk.sandbox_id}." in f.url]
        assert "/bac_stream/" in viewer.url  # the token in the path: no cookie needed
        drawn = viewer.wait_for_function(
            "() => { const c = document.querySelector('#screen canvas');"
            " if (!c || c.width !== 1024) return 0;"
            " const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
            " const s = new Set(); for (let i = 0; i < d.length; i += 4 * 97)"
            " s.add(d[i] << 16 | d[i + 1] << 8 | d[i + 2]); return s.size > 10 ? s.size : 0; }",
            timeout=30_000)
        assert drawn.json_value() > 10  # more than a blank canvas's colours
        shot(page, "sandbox-desktop")
        assert page.csp_errors == []  # type: ignore[attr-defined]
    finally:
        desk.kill()
