"""Bac's own SDK and CLI on a desktop sandbox: a screenshot, and the live viewer's URL
(the stream started inside on demand, the URL admitted by the gateway with its token and
refused without), through a real server and a real `desktop` sandbox."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "compat"))

from bac_process import ServerProcess, running

import bac

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with running("desktop-verbs") as srv:
        srv.create_key("desk")
        yield srv


@pytest.fixture(scope="module")
def desk(server: ServerProcess) -> Iterator[bac.Sandbox]:
    try:
        sandbox = bac.Sandbox.create("desktop", timeout=300, api_key=server.keys[0],
                                     api_url=server.url)
    except bac.NotFoundError as exc:
        pytest.skip(f"the desktop template is not built here: {exc}")
    with sandbox:  # killed, and its connections closed, at the end
        yield sandbox


def _size(png: bytes) -> tuple[int, int]:
    from PIL import Image

    return Image.open(io.BytesIO(png)).size


def test_a_screenshot_is_the_whole_screen(desk: bac.Sandbox) -> None:
    png = desk.desktop.screenshot()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and _size(png) == (1024, 768)
    # It leaves nothing behind in the sandbox.
    assert desk.commands.run("ls /tmp | grep -c bac-screenshot || true").stdout.strip() == "0"


def test_the_stream_url_admits_its_viewer_only(desk: bac.Sandbox,
                                               server: ServerProcess) -> None:
    stream = desk.desktop.stream(ttl=120)
    again = desk.desktop.stream()  # the stream runs already: a new URL, nothing restarted
    assert desk.commands.run("pgrep -c -x x11vnc").stdout.strip() == "1"
    assert stream.port == 6080 and "password" not in stream.url
    parts = urlsplit(stream.url)
    assert parts.hostname == f"6080-{desk.sandbox_id}.localhost"
    path = f"{parts.path}?{parts.query}"
    host = {"Host": f"6080-{desk.sandbox_id}.localhost"}
    page = httpx.get(f"{server.url}{path}", headers=host)
    assert page.status_code == 200 and "noVNC" in page.text
    bare = httpx.get(f"{server.url}/vnc.html", headers=host)
    assert bare.status_code == 403
    assert again.token != stream.token or again.expires_at >= stream.expires_at


def _cli(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BAC_API_KEY": server.keys[0], "BAC_API_URL": server.url}
    return subprocess.run([sys.executable, "-c", "from bac.cli import main; main()", *args],
                          capture_output=True, text=True, env=env, timeout=120, check=False)


def test_the_cli_prints_the_url_and_writes_the_screenshot(desk: bac.Sandbox,
                                                          server: ServerProcess,
                                                          tmp_path: Path) -> None:
    opened = _cli(server, "desktop", "open", desk.sandbox_id, "--json")
    assert opened.returncode == 0, opened.stderr
    assert "bac_stream=" in json.loads(opened.stdout)["url"]
    out = tmp_path / "screen.png"
    shot = _cli(server, "desktop", "screenshot", desk.sandbox_id, str(out))
    assert shot.returncode == 0, shot.stderr
    assert _size(out.read_bytes()) == (1024, 768)
    assert desk.is_running()  # the CLI leaves the sandbox running
    gone = _cli(server, "desktop", "screenshot", "nosuchsandbox00000000", str(out))
    assert gone.returncode == 4 and len(gone.stderr.strip().splitlines()) == 1
