"""Build a Debian rootfs from a :class:`Recipe` with mmdebstrap, atomically.

The build happens in ``<dir>/.build-<digest>-<pid>``; the finished tree (with its
``template.json`` written last) is renamed to ``<dir>/<digest>`` in one step, so a reader
either sees a complete template or none. A crashed build leaves only a ``.build-*``
directory, removed by the next build.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from bac_server.cancel_safe import end_child
from bac_server.host import remove_tree

from .._errors import TemplateBuildError
from .._idshift import shift_ownership
from ._recipe import Recipe

ProgressCallback = Callable[[str], None]

DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SECURITY_MIRROR = "http://deb.debian.org/debian-security"
METADATA_FILE = "template.json"


def _sources(suite: str) -> list[str]:
    mirror = os.environ.get("BAC_DEBIAN_MIRROR", DEFAULT_MIRROR)
    security = os.environ.get("BAC_DEBIAN_SECURITY_MIRROR", DEFAULT_SECURITY_MIRROR)
    return [
        f"deb {mirror} {suite} main",
        f"deb {mirror} {suite}-updates main",
        f"deb {security} {suite}-security main",
    ]


async def run_step(argv: list[str], progress: ProgressCallback, step: str,
                   env: dict[str, str] | None = None) -> None:
    """Run one build step, reporting each output line; raise with its tail on failure."""
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env,
    )
    assert proc.stdout is not None
    tail: list[str] = []
    try:
        async for raw in proc.stdout:
            line = raw.decode(errors="replace").rstrip()
            if line:
                tail = [*tail[-19:], line]
                progress(line)
        code = await proc.wait()
    except BaseException:
        # A cancelled build must not leave mmdebstrap or apt running on its tree.
        await end_child(proc)
        raise
    if code != 0:
        raise TemplateBuildError(f"{step} failed (exit {code}):\n" + "\n".join(tail))


def _write(path: Path, text: str, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.chmod(path, mode)


async def _customize(rootfs: Path, recipe: Recipe, progress: ProgressCallback) -> None:
    progress(f"adding user {recipe.user} (uid {recipe.uid}, home {recipe.home})")
    await run_step(["chroot", str(rootfs), "useradd", "--create-home", "--home-dir", recipe.home,
                "--uid", str(recipe.uid), "--user-group", "--shell", "/bin/bash", recipe.user],
               progress, "useradd")
    if recipe.passwordless_sudo:
        _write(rootfs / "etc/sudoers.d/90-bac-user",
               f"{recipe.user} ALL=(ALL:ALL) NOPASSWD: ALL\n", 0o440)
    if recipe.pip_break_system_packages:
        _write(rootfs / "etc/pip.conf", "[global]\nbreak-system-packages = true\n", 0o644)
    _write(rootfs / "etc/default/locale", "LANG=C.UTF-8\n", 0o644)
    # The build host's resolver and name must not leak into sandboxes.
    (rootfs / "etc/resolv.conf").unlink(missing_ok=True)
    _write(rootfs / "etc/resolv.conf", "# no resolver configured\n", 0o644)
    _write(rootfs / "etc/hostname", "sandbox\n", 0o644)
    _write(rootfs / "etc/machine-id", "", 0o444)
    # Mount points the backend binds over; present in the template so no sandbox
    # has to create (copy up) them.
    (rootfs / "opt/bac").mkdir(parents=True, exist_ok=True)


def _stale_builds(parent: Path) -> list[Path]:
    return list(parent.glob(".build-*"))


def _mkdir_private(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True)


def _publish(work: Path, final: Path, metadata: str) -> None:
    """Write the metadata last, then make the build visible in one rename."""
    (work / METADATA_FILE).write_text(metadata)
    os.rename(work, final)


async def build_rootfs(recipe: Recipe, parent: Path, progress: ProgressCallback,
                       id_size: int) -> Path:
    """Build ``recipe`` into ``parent/<digest>`` and return that directory."""
    if shutil.which("mmdebstrap") is None:
        raise TemplateBuildError("mmdebstrap is not installed (apt-get install mmdebstrap)")
    digest = recipe.digest()
    final = parent / digest
    for stale in _stale_builds(parent):
        progress(f"removing an interrupted build: {stale.name}")
        await asyncio.to_thread(remove_tree, stale)
    work = parent / f".build-{digest}-{os.getpid()}"
    _mkdir_private(work)
    rootfs = work / "rootfs"
    started = time.monotonic()
    try:
        argv = ["mmdebstrap", "--mode=root", f"--variant={recipe.variant}",
                "--include=" + ",".join(recipe.packages)]
        argv += [f"--dpkgopt={opt}" for opt in recipe.dpkg_options]
        argv += [recipe.suite, str(rootfs), *_sources(recipe.suite)]
        progress(f"building template {recipe.name} ({recipe.suite}, "
                 f"{len(recipe.packages)} packages) with mmdebstrap")
        await run_step(argv, progress, "mmdebstrap")
        await _customize(rootfs, recipe, progress)
        progress(f"shifting ownership to host ids {recipe.id_base}..")
        count = await asyncio.to_thread(shift_ownership, rootfs, recipe.id_base, id_size)
        # The lower layer's root is the sandbox's "/"; 0755 and owned by container root.
        os.chmod(rootfs, 0o755)  # noqa: S103 - it is "/" of every sandbox
        meta = {"recipe": recipe.__dict__, "digest": digest, "inodes": count,
                "built_at": time.time(), "build_seconds": round(time.monotonic() - started, 1)}
        _publish(work, final, json.dumps(meta, indent=2, default=list))
    except BaseException:
        await asyncio.to_thread(remove_tree, work)
        raise
    progress(f"template {recipe.name} ready in {time.monotonic() - started:.1f}s: {final}")
    return final
