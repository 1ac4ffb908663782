"""FROM debian:<suite>: a minbase rootfs built from Debian's archive with mmdebstrap (~1 min,
once per test session: the data dir is session-scoped)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from image_fixtures import run_in, session_dir

from bac_server.host import IdRange
from bac_server.templates import FromImage, ImportedImage, materialize_image
from bac_server.templates.images._debian import SUITE_CONFIG, suite_recipe
from bac_server.templates.images._refs import DebianSuite

pytestmark = [pytest.mark.root, pytest.mark.slow]

__all__ = ["session_dir"]


@pytest.fixture(scope="session")
def debian_data_dir(session_dir: Path) -> Iterator[Path]:
    path = session_dir / "debian"
    path.mkdir(mode=0o700, exist_ok=True)
    yield path


async def materialize(ref: str, data_dir: Path, lines: list[str]) -> ImportedImage:
    return await materialize_image(FromImage(ref), data_dir=data_dir, id_range=IdRange(),
                                   progress=lines.append)


@pytest.mark.timeout(600)
async def test_debian_bookworm(debian_data_dir: Path) -> None:
    """debian:bookworm builds a Debian 12 rootfs with python3 and CA certificates, shifted
    to the sandbox ids and named by its recipe digest; the second materialize is a cache
    hit that builds nothing."""
    lines: list[str] = []
    image = await materialize("debian:bookworm", debian_data_dir, lines)
    base = IdRange().base
    assert image.digest == suite_recipe(DebianSuite("bookworm", slim=False), base).digest()
    assert image.config == SUITE_CONFIG
    root = image.rootfs
    assert (root / "etc/debian_version").read_text().startswith("12.")
    assert (root / "etc/ssl/certs/ca-certificates.crt").stat().st_size > 100_000
    assert (root / "usr/bin/python3").stat().st_uid == base
    assert (root / "usr/share/man").exists(), "the non-slim image keeps documentation"
    assert run_in(root, "/usr/bin/python3", "-c", "import ssl; print('ok')") == "ok\n"
    assert any("mmdebstrap" in line for line in lines)
    assert not list((debian_data_dir / "images" / ".tmp").iterdir())

    again: list[str] = []
    started = time.monotonic()
    assert await materialize("debian:bookworm", debian_data_dir, again) == image
    assert time.monotonic() - started < 1.0
    assert not any("mmdebstrap" in line for line in again)
