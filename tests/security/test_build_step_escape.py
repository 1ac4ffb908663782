"""Escapes tried for real from inside a template build step; each test fails if one works."""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import shutil
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from test_build_step_support import (
    SANDBOX_ROOT,
    BuildWatch,
    Output,
    fake_target,
    layers_dir,
    probe,
    run_step,
)

from bac_server.backends.base import SandboxSetupError, TemplateImage
from bac_server.backends.namespaces import NamespaceBackend

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]
HOST_ADDRESS = "192.0.2.2"  # this machine's eth0


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def host_secret() -> Iterator[tuple[Path, str]]:
    secret = secrets.token_hex(16)
    path = Path(f"/root/bac-secret-{secrets.token_hex(4)}")
    path.write_text(secret)
    path.chmod(0o644)
    yield path, secret
    path.unlink()


async def test_lower_layers_stay_unwritten(backend: NamespaceBackend,
                                           template: TemplateImage) -> None:
    """Root in a step rewrites, deletes and chmods files of its lower layers, also by the
    host paths its mount table reveals; the layers on the host do not change."""
    first = await run_step(backend, (template.rootfs,), "echo layer-one >/one")
    lowers = (first.upper, template.rootfs)
    before = {p: _digest(p) for p in (template.rootfs / "etc/passwd", first.upper / "one")}
    script = ("echo pwned >/etc/passwd; echo pwned >/one; rm -rf /usr/share/doc; "
              "chmod 777 /etc/shadow; "
              "for dir in $(grep -o 'lowerdir=[^,]*' /proc/self/mountinfo | cut -d= -f2 "
              "| tr : ' '); do echo pwned >$dir/one && echo WROTE $dir; done; true")
    result = await run_step(backend, lowers, script)
    assert result.code == 0
    assert not [line for line in result.output.stdout if line.startswith("WROTE")]
    assert {p: _digest(p) for p in before} == before
    assert (template.rootfs / "usr/share/doc").is_dir()
    assert stat.S_IMODE(os.stat(template.rootfs / "etc/shadow").st_mode) != 0o777
    assert (result.upper / "etc/passwd").read_text() == "pwned\n"  # the write went up


async def test_mounts_and_namespaces_are_refused(backend: NamespaceBackend,
                                                 template: TemplateImage) -> None:
    """Root in a step can neither mount, remount its read-only bind writable, nor make
    namespaces of its own."""
    context = layers_dir(backend) / "context"
    context.mkdir(mode=0o755)
    script = ("mount -t tmpfs none /mnt; echo rc=$?; mount -o remount,rw /ctx; echo rc=$?; "
              "mount --bind / /mnt; echo rc=$?; unshare -Urm true; echo rc=$?; "
              "touch /ctx/x; echo rc=$?")
    result = await run_step(backend, (template.rootfs,), script,
                            binds=((context, "/ctx"),))
    assert result.output.stdout == ["rc=32", "rc=32", "rc=32", "rc=1", "rc=1"], result.output
    assert list(context.iterdir()) == []


async def test_bind_leads_nowhere_else_on_the_host(backend: NamespaceBackend,
                                                   template: TemplateImage,
                                                   host_secret: tuple[Path, str]) -> None:
    """Through a bound directory a step reaches neither a host file its links name, nor
    its parent directories, nor setuid or device files in it."""
    path, secret = host_secret
    context = layers_dir(backend) / "context"
    context.mkdir(mode=0o755)
    (context.parent / "sibling-secret").write_text(secret)
    (context / "link").symlink_to(path)
    (context / "dotdot").symlink_to("../sibling-secret")
    shutil.copy(template.rootfs / "usr/bin/id", context / "suid-id")
    os.chown(context / "suid-id", SANDBOX_ROOT, SANDBOX_ROOT)
    os.chmod(context / "suid-id", 0o4755)
    os.mknod(context / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    os.chmod(context / "null", 0o666)  # writable for all: only nodev may stop the write
    script = (f"cat /ctx/link /ctx/dotdot /ctx/../sibling-secret /ctx/../../{path} "
              f"{context.parent}/sibling-secret {path}; /ctx/suid-id; "
              "echo data >/ctx/null && echo WROTE-DEVICE; true")
    result = await run_step(backend, (template.rootfs,), script, user="user",
                            binds=((context, "/ctx"),))
    everything = "\n".join(line for _, line in result.output.lines)
    assert secret not in everything
    assert "euid=" not in everything and "uid=1000(user)" in everything  # nosuid
    assert "WROTE-DEVICE" not in everything  # nodev


@pytest.fixture
def decoy_passwd() -> Iterator[Path]:
    """A host file that, read as /etc/passwd, would make user ``decoy`` uid 0."""
    decoy = Path(f"/root/bac-passwd-{secrets.token_hex(4)}")
    decoy.write_text("decoy:x:0:0::/:/bin/sh\n")
    yield decoy
    decoy.unlink()


async def test_crafted_passwd_link_is_not_followed_on_the_host(
        backend: NamespaceBackend, template: TemplateImage, decoy_passwd: Path) -> None:
    """A layer whose /etc/passwd links to a host file naming a user as uid 0 does not
    make the host read that file: the user is refused, the command never runs."""
    layer = await run_step(backend, (template.rootfs,),
                           f"rm /etc/passwd && ln -s {decoy_passwd} /etc/passwd")
    assert layer.code == 0
    output = Output()
    with pytest.raises(SandboxSetupError, match="not a regular file"):
        await run_step(backend, (layer.upper, template.rootfs), "echo RAN", user="decoy",
                       output=output)
    assert output.lines == []


async def test_fifo_passwd_does_not_hang_the_server(backend: NamespaceBackend,
                                                    template: TemplateImage) -> None:
    """A FIFO planted at /etc/group is refused at once instead of blocking the lookup."""
    layer = await run_step(backend, (template.rootfs,), "rm /etc/group && mkfifo /etc/group")
    assert layer.code == 0
    with pytest.raises(SandboxSetupError, match="not a regular file"):
        await asyncio.wait_for(run_step(backend, (layer.upper, template.rootfs), "true",
                                        user="user"), 30)


async def test_nothing_outlives_the_step(backend: NamespaceBackend,
                                         template: TemplateImage) -> None:
    """A daemon the step detaches (new session, ignoring SIGHUP) dies with the step."""
    output = Output()
    watches: list[BuildWatch] = []

    async def observe() -> None:
        await output.wait_for("detached")
        watches.append(BuildWatch.take(backend))

    observing = asyncio.create_task(observe())
    script = ("setsid nohup sh -c 'trap \"\" TERM HUP; sleep 1000' >/dev/null 2>&1 & "
              "sleep 0.2; echo detached; sleep 0.5")
    result = await run_step(backend, (template.rootfs,), script, output=output)
    await observing
    assert result.code == 0
    assert len(watches[0].processes) >= 2
    assert watches[0].leftovers() == []


@pytest_asyncio.fixture(loop_scope="session")
async def host_port() -> AsyncIterator[int]:
    """A TCP listener of the host on every address."""
    server = await asyncio.start_server(lambda _r, w: w.close(), "0.0.0.0", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()


async def test_host_is_unreachable_from_a_step(backend: NamespaceBackend,
                                               template: TemplateImage,
                                               host_port: int) -> None:
    """A host listener is unreachable from a step at the host's address, at the step's
    gateway and at the host's end of another network; the internet is reachable (so the
    probe itself works)."""
    _, writer = await asyncio.open_connection(HOST_ADDRESS, host_port)
    writer.close()  # the listener answers on the host
    with fake_target() as target:
        uplink = target.replace("203.0.113.", "10.204.") + ".1"
        found = await probe(backend, (template.rootfs,), f"{target}:80",
                            f"{HOST_ADDRESS}:{host_port}", f"gateway:{host_port}",
                            f"{uplink}:{host_port}", "169.254.169.254:80")
    assert found.pop(f"{target}:80") == "ok"
    assert all(result != "ok" for result in found.values()), found


async def test_step_root_cannot_take_the_hosts_dev_null(backend: NamespaceBackend,
                                                        template: TemplateImage) -> None:
    """A build step leaves the host's /dev/null owned by host root, so root in the step
    can neither chmod nor chown it (which would break it for the whole host)."""
    before = os.stat("/dev/null")
    try:
        result = await run_step(
            backend, (template.rootfs,),
            "chmod 000 /dev/null 2>&1; chown root /dev/null 2>&1; ls -ln /proc/self/fd/0; "
            "echo done")
        after = os.stat("/dev/null")
        assert (after.st_uid, after.st_gid) == (0, 0)
        assert after.st_mode == before.st_mode
        assert "done" in result.output.stdout
    finally:
        now = os.stat("/dev/null")
        if (now.st_uid, now.st_gid, now.st_mode) != (before.st_uid, before.st_gid,
                                                       before.st_mode):
            os.chown("/dev/null", before.st_uid, before.st_gid)
            os.chmod("/dev/null", before.st_mode & 0o7777)
