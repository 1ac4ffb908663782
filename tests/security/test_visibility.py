"""A sandbox sees only its own processes, hostname, filesystem and network, and its root
is not the host's root."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from backend_harness import SandboxFactory, footprint

from bac_server.backends.base import TemplateImage
from bac_server.backends.namespaces import NamespaceBackend
from bac_server.host import IdRange

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]


async def test_sees_only_its_own_processes(make_sandbox: SandboxFactory) -> None:
    """ps inside lists envd and the command's own processes, none of the host's."""
    sbx = await make_sandbox()
    result = await sbx.run("ps -eo pid=,args=", user="root")
    rows = [line.split(None, 1) for line in result.stdout.strip().splitlines()]
    assert rows[0][0] == "1" and "bac_envd" in rows[0][1]  # envd is pid 1
    assert len(rows) <= 4, rows  # envd, the shell, ps
    assert not any("pytest" in args or "process_api" in args for _pid, args in rows)


async def test_sees_only_its_own_hostname(make_sandbox: SandboxFactory) -> None:
    """The hostname (UTS namespace) is the sandbox id, not the host's."""
    sbx = await make_sandbox()
    result = await sbx.run("hostname; cat /proc/sys/kernel/hostname")
    assert result.stdout.split() == [sbx.id, sbx.id]
    assert os.uname().nodename != sbx.id


@pytest.fixture
def host_marker() -> Iterator[Path]:
    marker = Path(f"/tmp/bac-host-marker-{secrets.token_hex(4)}")
    marker.write_text("host secret")
    yield marker
    marker.unlink()


def _template_untouched(rootfs: Path) -> bool:
    return not (rootfs / "usr/bin/planted").exists() and \
        "changed" not in (rootfs / "etc/motd").read_text()


async def test_sees_only_its_own_filesystem(make_sandbox: SandboxFactory,
                                            template: TemplateImage, host_marker: Path) -> None:
    """A host file is invisible inside; writes inside never reach the template or host."""
    sbx = await make_sandbox()
    result = await sbx.run(f"cat {host_marker}; ls /tmp", user="root")
    assert "host secret" not in result.stdout
    assert host_marker.name not in result.stdout
    await sbx.run("echo changed > /etc/motd; touch /usr/bin/planted", user="root")
    assert (await sbx.run("cat /etc/motd")).stdout.strip() == "changed"
    assert _template_untouched(template.rootfs)


async def test_sees_only_its_own_network(make_sandbox: SandboxFactory) -> None:
    """Only lo and eth0 (with the sandbox's own address) exist inside."""
    sbx = await make_sandbox()
    result = await sbx.run("ip -o -4 addr show | awk '{print $2, $4}'")
    assert sorted(result.stdout.strip().splitlines()) == [f"eth0 {sbx.address}",
                                                         "lo 127.0.0.1/8"]
    links = await sbx.run("ip -o link show | awk -F': ' '{print $2}'")
    assert {name.split("@")[0] for name in links.stdout.split()} == {"lo", "eth0"}


def _status(pid: int) -> str:
    return Path(f"/proc/{pid}/status").read_text()


async def test_root_inside_is_not_root_outside(backend: NamespaceBackend,
                                               make_sandbox: SandboxFactory) -> None:
    """Processes and files of the sandbox's root belong to an unprivileged host uid."""
    sbx = await make_sandbox()
    await sbx.run("sleep 600 >/dev/null 2>&1 & touch /root-made-file", user="root")
    ids = IdRange()
    for pid, _start in footprint(backend, sbx.id).processes:
        status = _status(pid)
        uids = [int(u) for u in status.split("Uid:")[1].split("\n")[0].split()]
        gids = [int(g) for g in status.split("Gid:")[1].split("\n")[0].split()]
        assert all(ids.base <= u < ids.base + ids.size for u in uids + gids), (pid, uids)
        effective = int(status.split("CapEff:")[1].split()[0], 16)
        assert effective & (1 << 21) == 0  # CAP_SYS_ADMIN never held
    upper = footprint(backend, sbx.id).slot_dir / "layer" / "upper" / "root-made-file"
    assert upper.stat().st_uid == ids.base
