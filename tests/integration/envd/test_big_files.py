"""Files of 128 MiB stream through envd both ways without envd holding them in memory."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from e2b import Sandbox
from envd_harness import Envd

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.timeout(300)]
SIZE = 128 * 1024 * 1024
# envd's own buffers are a few MiB (h11 body queue, 1 MiB file chunks); a file held in
# memory would add its whole size.
MAX_GROWTH_KIB = 32 * 1024


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    path = tmp_path_factory.mktemp("big") / "big.bin"
    digest = hashlib.sha256()
    with path.open("wb") as f:
        for _ in range(SIZE // (4 << 20)):
            chunk = os.urandom(4 << 20)
            digest.update(chunk)
            f.write(chunk)
    yield path, digest.hexdigest()
    path.unlink()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(4 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def warm(sandbox: Sandbox, workdir: Path) -> int:
    """Load every code path once so the peak-RSS baseline includes the code itself."""
    sandbox.files.write(str(workdir / "warm"), b"x" * 100_000)
    sandbox.files.read(str(workdir / "warm"), format="bytes")
    return 0


def test_big_upload_streams(
    sandbox: Sandbox, envd: Envd, workdir: Path, big_file: tuple[Path, str]
) -> None:
    """A 128 MiB octet-stream upload lands byte-exact; envd's peak RSS grows < 32 MiB."""
    source, digest = big_file
    warm(sandbox, workdir)
    before = envd.status()["VmHWM"]
    with source.open("rb") as f:
        sandbox.files.write(str(workdir / "up.bin"), f, request_timeout=240)
    assert sha256_file(workdir / "up.bin") == digest
    assert envd.status()["VmHWM"] - before < MAX_GROWTH_KIB


def test_big_multipart_upload_streams(
    envd: Envd, workdir: Path, big_file: tuple[Path, str]
) -> None:
    """A 128 MiB multipart upload is parsed incrementally; envd's peak RSS grows < 32 MiB."""
    source, digest = big_file
    target = str(workdir / "multi.bin")
    httpx.post(f"{envd.url}/files", params={"path": target}, files={"file": ("w", b"w")})
    before = envd.status()["VmHWM"]
    with source.open("rb") as f:
        response = httpx.post(
            f"{envd.url}/files",
            params={"path": target},
            files={"file": ("big.bin", f)},
            timeout=240,
        )
    assert response.status_code == 200, response.text
    assert sha256_file(Path(target)) == digest
    assert envd.status()["VmHWM"] - before < MAX_GROWTH_KIB


@pytest.mark.parametrize("gzip", [False, True])
def test_big_download_streams(
    sandbox: Sandbox, envd: Envd, workdir: Path, big_file: tuple[Path, str], gzip: bool
) -> None:
    """A 128 MiB download (plain and gzip) arrives byte-exact; envd's peak RSS grows < 32 MiB."""
    source, digest = big_file
    warm(sandbox, workdir)
    before = envd.status()["VmHWM"]
    received = hashlib.sha256()
    stream = sandbox.files.read(str(source), format="stream", gzip=gzip, request_timeout=240)
    for chunk in stream:
        received.update(chunk)
    assert received.hexdigest() == digest
    assert envd.status()["VmHWM"] - before < MAX_GROWTH_KIB
