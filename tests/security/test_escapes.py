"""Classic container escapes, each tried for real from inside a sandbox."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest
from backend_harness import SandboxFactory, footprint

from bac_server.backends.base import TemplateImage
from bac_server.backends.namespaces import NamespaceBackend

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]


@pytest.fixture
def host_secret() -> tuple[Path, str]:
    secret = secrets.token_hex(16)
    path = Path(f"/root/bac-secret-{secrets.token_hex(4)}")
    path.write_text(secret)
    path.chmod(0o644)
    yield path, secret  # type: ignore[misc]
    path.unlink()


async def test_mount_is_refused(make_sandbox: SandboxFactory) -> None:
    """Root cannot mount anything (tmpfs, proc, a bind of /) inside the sandbox."""
    sbx = await make_sandbox()
    result = await sbx.run("mkdir -p /mnt/x; mount -t tmpfs none /mnt/x; echo rc=$?;"
                           "mount --bind / /mnt/x; echo rc=$?;"
                           "mount -t proc proc /mnt/x; echo rc=$?; grep -c /mnt/x /proc/mounts",
                           user="root")
    assert result.stdout.split() == ["rc=32", "rc=32", "rc=32", "0"], result.stdout


async def test_host_files_unreachable_through_proc(make_sandbox: SandboxFactory,
                                                   host_secret: tuple[Path, str]) -> None:
    """/proc/*/root, /proc/*/cwd and /proc/*/fd of every visible process lead only inside."""
    path, secret = host_secret
    sbx = await make_sandbox()
    script = (f"for p in /proc/[0-9]*; do cat $p/root{path} $p/cwd{path} "
              f"$p/root/../../..{path} 2>/dev/null; for f in $p/fd/*; do [ -f $f ] && "
              f"grep -a {secret} $f 2>/dev/null; done; done; "
              f"cat /proc/1/root/etc/hostname")
    result = await sbx.run(script, user="root")
    assert secret not in result.stdout
    assert result.stdout.strip().endswith(sbx.id)  # /proc/1/root is the sandbox's own root


async def test_symlinks_resolve_inside_the_sandbox(make_sandbox: SandboxFactory,
                                                   host_secret: tuple[Path, str]) -> None:
    """Absolute and relative symlinks to a host path resolve within the sandbox's root."""
    path, secret = host_secret
    sbx = await make_sandbox()
    result = await sbx.run(f"ln -s {path} /tmp/abs; ln -s ../../../../../..{path} /tmp/rel; "
                           "cat /tmp/abs /tmp/rel 2>&1; true", user="root")
    assert secret not in result.stdout
    with pytest.raises(Exception, match=r"(?i)not (exist|found)"):
        await sbx.sdk.files.read("/tmp/abs", user="root")  # type: ignore[arg-type]


async def test_host_cleanup_does_not_follow_sandbox_symlinks(
        backend: NamespaceBackend, make_sandbox: SandboxFactory, tmp_path: Path) -> None:
    """Symlinks the sandbox plants in its layer never lead host-side code (usage, destroy)
    into host files."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("host data")
    sbx = await make_sandbox()
    await sbx.run(f"ln -s {victim} /tmp/dir-link; ln -s {victim}/keep /tmp/file-link; "
                  "mkdir -p /tmp/loop && ln -s /tmp/loop /tmp/loop/self", user="root")
    await backend.usage(sbx.id)
    await backend.destroy(sbx.id)
    assert (victim / "keep").read_text() == "host data"


OVERCOMMIT = Path("/proc/sys/vm/overcommit_ratio")
KSM = Path("/sys/kernel/mm/ksm/run")


def _read(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


async def test_sys_and_proc_sys_are_read_only(make_sandbox: SandboxFactory) -> None:
    """Root cannot write kernel settings through /proc/sys, /proc/sysrq-trigger or /sys."""
    before = _read(OVERCOMMIT)
    ksm_before = _read(KSM)
    assert before is not None
    sbx = await make_sandbox()
    new = str(int(before) + 7)
    result = await sbx.run(f"echo {new} > /proc/sys/vm/overcommit_ratio; echo rc=$?;"
                           "echo 1 > /proc/sys/kernel/sysrq; echo rc=$?;"
                           "echo h > /proc/sysrq-trigger; echo rc=$?;"
                           "echo 1 > /sys/kernel/mm/ksm/run; echo rc=$?;"
                           "touch /sys/new-file; echo rc=$?", user="root")
    assert "rc=0" not in result.stdout, result.stdout
    assert _read(OVERCOMMIT) == before
    assert _read(KSM) == ksm_before


async def test_module_loading_is_refused(make_sandbox: SandboxFactory) -> None:
    """No kernel module can be loaded (no modprobe, init_module/finit_module refused)."""
    sbx = await make_sandbox()
    result = await sbx.python("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                              "fd = os.open('/bin/true', os.O_RDONLY)\n"
                              "print(libc.syscall(313, fd, b'', 0), ctypes.get_errno())\n")
    assert result.stdout.split() == ["-1", "1"]
    assert "modprobe" not in (await sbx.run("ls /sbin /usr/sbin")).stdout.split()


async def test_ptrace_of_host_processes_is_impossible(make_sandbox: SandboxFactory) -> None:
    """Host processes are not in the pid namespace, and ptrace is refused even inside."""
    sbx = await make_sandbox()
    host_pid = os.getpid()
    result = await sbx.python(
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"for pid in (1, {host_pid}, os.getppid()):\n"
        "    ctypes.set_errno(0)\n"
        "    print(libc.ptrace(16, pid, None, None), ctypes.get_errno())\n"
        f"print(os.path.exists('/proc/{host_pid}/cmdline') and "
        f"'pytest' in open('/proc/{host_pid}/cmdline').read())\n")
    lines = result.stdout.strip().splitlines()
    assert all(line.startswith("-1 ") for line in lines[:3]), lines
    assert lines[3] == "False"


async def test_cannot_move_to_another_cgroup(backend: NamespaceBackend,
                                             make_sandbox: SandboxFactory) -> None:
    """No cgroup filesystem is reachable or mountable; its processes stay in its cgroup."""
    sbx = await make_sandbox()
    await sbx.run(
        "ls /sys/fs/cgroup; mkdir -p /tmp/cg; mount -t cgroup -o memory cgroup /tmp/cg;"
        "mount -t cgroup2 none /tmp/cg; for f in $(find /sys/fs/cgroup /tmp/cg "
        "-name cgroup.procs 2>/dev/null); do echo $$ > $f; done; "
        "sleep 600 >/dev/null 2>&1 &", user="root")
    fp = footprint(backend, sbx.id)
    members = set()
    for cgroup in fp.cgroups:
        members |= {int(p) for p in (cgroup / "cgroup.procs").read_text().split()}
    own = (await sbx.run("cat /proc/self/cgroup", user="root")).stdout
    assert all(line.endswith(":/") for line in own.strip().splitlines()), own
    for pid, _ in fp.processes:
        assert pid in members
    memory = next(c for c in fp.cgroups if c.parent.parent.name == "memory")
    assert {int(p) for p in (memory / "cgroup.procs").read_text().split()} >= \
        {pid for pid, _ in fp.processes}


async def test_cannot_change_its_network_identity(make_sandbox: SandboxFactory) -> None:
    """Root cannot add addresses, take eth0 down or change routes (no CAP_NET_ADMIN)."""
    sbx = await make_sandbox()
    result = await sbx.run("ip addr add 10.202.255.1/32 dev eth0; echo rc=$?;"
                           "ip link set eth0 down; echo rc=$?;"
                           "ip route del default; echo rc=$?;"
                           "ip link add dummy0 type dummy; echo rc=$?", user="root")
    assert "rc=0" not in result.stdout, result.stdout
    assert await sbx.health() == 204


async def test_no_host_devices(make_sandbox: SandboxFactory) -> None:
    """Only the harmless character devices exist; creating or opening a disk fails."""
    sbx = await make_sandbox()
    result = await sbx.run("ls /dev; mknod /tmp/disk b 254 0; echo rc=$?;"
                           "head -c1 /dev/vda; echo rc=$?", user="root")
    names = set(result.stdout.split())
    assert not names & {"vda", "sda", "kmsg", "mem", "kvm", "vsock", "fuse", "loop0"}
    assert "rc=0" not in result.stdout


_SETUID_PROBE = ("cp /usr/bin/id /tmp/setuid-id && chmod 4755 /tmp/setuid-id && "
                 "su user -s /bin/sh -c '/tmp/setuid-id -u; sudo -n id -u 2>&1; "
                 "grep NoNewPrivs /proc/self/status'")


async def test_a_template_without_the_opt_in_gets_no_new_privileges(
        make_sandbox: SandboxFactory, template: TemplateImage) -> None:
    """A template that does not ask for setuid (the default) runs with no-new-privileges:
    a setuid-root binary, sudo included, leaves the user the user."""
    plain = TemplateImage("no-setuid", template.rootfs)
    assert plain.allow_setuid is False
    sbx = await make_sandbox(template=plain)
    result = await sbx.run(_SETUID_PROBE, user="root")
    lines = result.stdout.splitlines()
    assert lines[0] == "1000", result.stdout  # the setuid bit gave nothing
    assert "0" not in lines[1:-1], result.stdout  # nor did sudo
    assert lines[-1].split() == ["NoNewPrivs:", "1"], result.stdout


async def test_base_opts_in_to_setuid_so_sudo_works(make_sandbox: SandboxFactory,
                                                    template: TemplateImage) -> None:
    """`base` declares setuid: sudo (and any setuid-root binary) gives root inside."""
    assert template.allow_setuid is True
    sbx = await make_sandbox()
    result = await sbx.run(_SETUID_PROBE, user="root")
    assert result.stdout.splitlines()[:2] == ["0", "0"], result.stdout
    assert result.stdout.splitlines()[-1].split() == ["NoNewPrivs:", "0"]
