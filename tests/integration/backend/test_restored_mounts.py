"""A restored sandbox sees the very mounts it had: the same mount points, file systems,
flags and masks after a suspend and wake, and after a roll-back. On real runc sandboxes."""

from __future__ import annotations

import pytest
from backend_harness import Sandbox, SandboxFactory, new_id
from runc_fixtures import runc_fixtures

from bac_server.backends.base import SandboxSpec
from bac_server.backends.namespaces import NamespaceBackend

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]

runc_pair, runc, make = runc_fixtures("mounts")

# Each mount as the sandbox sees it: mount point, its own flags, file system, source and
# the file system's options; not the ids and device numbers, which a restore renews. The
# root overlay's options are left out: a roll-back mounts a copy of the upper layer, for
# which overlayfs shows no ``uuid=on``.
_MOUNTS = ("awk '{for (i = 7; $i != \"-\"; i++); "
           "print $5, $6, $(i+1), $(i+2), $(i+3)}' /proc/self/mountinfo")
# What the masks and read-only paths must still refuse, from root inside.
_PROBES = {
    "read /proc/kcore": "head -c1 /proc/kcore | wc -c",
    "read /proc/keys": "cat /proc/keys | wc -c",
    "write /proc/sys": "echo 1 > /proc/sys/kernel/ns_last_pid 2>/dev/null && echo wrote",
    "write /proc/sysrq-trigger": "echo h > /proc/sysrq-trigger 2>/dev/null && echo wrote",
    "write /sys": "touch /sys/kernel/bac-probe 2>/dev/null && echo wrote",
    "list /sys/firmware": "ls -A /sys/firmware | wc -l",
    "remount /": "mount -o remount,rw /sys 2>/dev/null && echo remounted",
}


async def _seen(sbx: Sandbox) -> tuple[list[str], dict[str, str]]:
    mounts = sorted(" ".join(line.split()[:3]) if line.startswith("/ ") else line
                    for line in (await sbx.run(_MOUNTS, user="root")).stdout.splitlines())
    probes = {name: (await sbx.run(command, user="root")).stdout.strip()
              for name, command in _PROBES.items()}
    return mounts, probes


def _same(after: tuple[list[str], dict[str, str]],
          before: tuple[list[str], dict[str, str]]) -> None:
    gone, new = sorted(set(before[0]) - set(after[0])), sorted(set(after[0]) - set(before[0]))
    assert (gone, new) == ([], []), f"mounts gone: {gone}\nmounts new: {new}"
    assert after == before


async def test_suspend_and_wake_keep_every_mount_and_mask(runc: NamespaceBackend,
                                                          make: SandboxFactory) -> None:
    """Security: the mount table, read-only flags and masks a sandbox had before a
    suspend are exactly what it has after the wake (and after a roll-back to a
    checkpoint); the masks still refuse root inside."""
    sbx = await make()
    spec = SandboxSpec(sandbox_id=sbx.id, template=make.template)
    before = await _seen(sbx)
    mounts, probes = before
    assert any(line.startswith("/proc/sys ") and line.split()[1].startswith("ro")
               for line in mounts), mounts
    assert probes["read /proc/kcore"] == "0" and probes["read /proc/keys"] == "0"
    assert probes["list /sys/firmware"] == "0"
    assert not any(value in ("wrote", "remounted") for value in probes.values()), probes

    await runc.suspend(sbx.id, memory=True)
    await runc.wake(spec)
    _same(await _seen(sbx), before)

    checkpoint = await runc.checkpoint(sbx.id, new_id("c"), memory=True)
    await runc.restore(spec, checkpoint.checkpoint_id)
    _same(await _seen(sbx), before)
