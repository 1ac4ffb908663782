"""Each sandbox's disk is a file system of its ``disk_mb``: writes past it fail inside with
ENOSPC, inodes are bounded with it, ``df /`` shows it, usage comes from its counters, and
it goes with the sandbox (no mount, no loop device left)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from backend_harness import SandboxFactory, footprint, leftovers

from bac_server.backends.base import ResourceLimitError
from bac_server.backends.namespaces import NamespaceBackend, NamespaceConfig
from bac_server.backends.namespaces.slots._disk import inodes_for
from bac_server.host._loop import loop_backing_files

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]

DISK_MB = 64
_MIB = 1024 * 1024

# Creates empty files until the disk refuses one; prints how many and the errno.
INODE_FILL = """
import os
os.makedirs("/home/user/many", exist_ok=True)
n = 0
try:
    while True:
        open(f"/home/user/many/{n}", "x").close()
        n += 1
except OSError as exc:
    print(n, exc.errno)
"""


def _allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


async def test_a_write_past_disk_mb_fails_with_enospc(backend: NamespaceBackend,
                                                      make_sandbox: SandboxFactory) -> None:
    """dd and fallocate past a 64 MiB disk fail with "No space left on device", the host
    gives the sandbox at most its disk, and usage says it is full."""
    sbx = await make_sandbox(disk_mb=DISK_MB)
    image = footprint(backend, sbx.id).slot_dir / "disk.img"
    size = (await sbx.run("df -B1 --output=size / | tail -1")).stdout.strip()
    assert DISK_MB * _MIB * 0.8 < int(size) <= DISK_MB * _MIB
    fallocated = await sbx.run("fallocate -l 200M /home/user/big")
    assert fallocated.exit_code != 0
    assert "No space left on device" in fallocated.stderr
    dd = await sbx.run("dd if=/dev/urandom of=/home/user/fill bs=1M count=200")
    assert dd.exit_code != 0
    assert "No space left on device" in dd.stderr
    assert _allocated(image) <= DISK_MB * _MIB
    usage = await backend.usage(sbx.id)
    assert usage.disk_full
    assert usage.disk_total_bytes == int(size)
    assert usage.disk_used_bytes > DISK_MB * _MIB * 0.8
    # Room again once the files go (a failed fallocate keeps what it got): the sandbox
    # is not broken, only full.
    after = await sbx.run("rm /home/user/fill /home/user/big && echo ok > /home/user/after && "
                          "cat /home/user/after")
    assert after.stdout.strip() == "ok", (after.stderr, after.exit_code)
    assert not (await backend.usage(sbx.id)).disk_full


async def test_files_are_bounded_by_the_disks_inodes(backend: NamespaceBackend,
                                                    make_sandbox: SandboxFactory) -> None:
    """Empty files run out at the disk's inode count (one per 16 KiB), with ENOSPC, and
    usage counts them from the file system's counters."""
    sbx = await make_sandbox(disk_mb=DISK_MB)
    out = (await sbx.python(INODE_FILL, user="user")).stdout.split()
    made, error = int(out[0]), int(out[1])
    assert error == 28  # ENOSPC
    assert inodes_for(DISK_MB) - 64 < made < inodes_for(DISK_MB)
    usage = await backend.usage(sbx.id)
    assert usage.disk_inodes_total == inodes_for(DISK_MB)
    assert usage.disk_inodes_used >= made
    assert usage.disk_full


async def test_the_disk_goes_with_the_sandbox(backend: NamespaceBackend,
                                              make_sandbox: SandboxFactory) -> None:
    """A destroyed sandbox leaves no mount, no loop device and no image of its disk."""
    sbx = await make_sandbox(disk_mb=DISK_MB)
    await sbx.run("head -c 8M /dev/urandom > /home/user/data")
    fp = footprint(backend, sbx.id)
    assert any(b.startswith(f"{fp.slot_dir}/") for b in loop_backing_files().values())
    await backend.destroy(sbx.id)
    assert leftovers(fp) == []


async def test_disk_outside_the_bounds_is_refused(backend: NamespaceBackend,
                                                  make_sandbox: SandboxFactory) -> None:
    """A disk below the minimum or above the maximum is refused before anything is made."""
    for disk_mb in (8, backend.config.max_disk_mb + 1):
        with pytest.raises(ResourceLimitError, match="disk_mb"):
            await make_sandbox(disk_mb=disk_mb)


async def test_a_new_backend_reattaches_the_disk(backend: NamespaceBackend,
                                                 make_sandbox: SandboxFactory) -> None:
    """After a server restart the disk is still the sandbox's (files, size, usage), and
    the new server's destroy removes it."""
    sbx = await make_sandbox(disk_mb=DISK_MB)
    await sbx.run("echo kept > /home/user/kept")
    fp = footprint(backend, sbx.id)
    await backend.close()
    again = NamespaceBackend(NamespaceConfig(data_dir=backend.config.data_dir))
    try:
        usage = await again.usage(sbx.id)
        assert usage.disk_total_bytes <= DISK_MB * _MIB and usage.disk_inodes_used > 0
        assert (await sbx.run("cat /home/user/kept")).stdout.strip() == "kept"
        await again.destroy(sbx.id)
        assert leftovers(fp) == []
    finally:
        await again.close()


async def test_pooled_slots_serve_only_creates_of_their_disk(
        backend: NamespaceBackend, make_sandbox: SandboxFactory) -> None:
    """A create asking for another disk than the default gets a disk of its own size."""
    sbx = await make_sandbox(disk_mb=128)
    size = int((await sbx.run("df -B1 --output=size / | tail -1")).stdout.strip())
    assert 100 * _MIB < size <= 128 * _MIB
    assert (await backend.usage(sbx.id)).disk_inodes_total == inodes_for(128)
