"""The host's device nodes stay the host's: starting, pausing and restoring sandboxes, and
the benchmark's bare runtime starts, never hand them to a sandbox's user; a server on a
host where one is not root's refuses to start."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from backend_harness import SandboxFactory

from bac_server.backends.base import TemplateImage
from bac_server.backends.namespaces.slots import (
    Limits,
    RuntimeFailed,
    SandboxPlan,
    build_config,
    spawn,
)
from bac_server.host import SANDBOX_DEVICES, IdRange, check_device_nodes

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import sandbox_create

pytestmark = pytest.mark.root
in_session_loop = pytest.mark.asyncio(loop_scope="session")

_NULL = "/dev/null"


@pytest.fixture
def host_null() -> Iterator[os.stat_result]:
    """The host's /dev/null as it was; put back if a test changed it (a failed test must
    not leave the machine broken)."""
    before = os.stat(_NULL)
    yield before
    now = os.stat(_NULL)
    if (now.st_uid, now.st_gid, now.st_mode) != (before.st_uid, before.st_gid, before.st_mode):
        os.chown(_NULL, before.st_uid, before.st_gid)
        os.chmod(_NULL, before.st_mode & 0o7777)


@in_session_loop
async def test_sandbox_root_cannot_take_the_hosts_dev_null(
        make_sandbox: SandboxFactory, host_null: os.stat_result) -> None:
    """A started sandbox leaves the host's /dev/null owned by host root, so root inside
    can neither chmod nor chown it (which would break it for the whole host)."""
    sbx = await make_sandbox()
    after = os.stat(_NULL)
    assert (after.st_uid, after.st_gid) == (host_null.st_uid, host_null.st_gid) == (0, 0)
    attempt = await sbx.run("chmod 000 /dev/null 2>&1; chown root /dev/null 2>&1; echo done",
                            user="root")
    assert "done" in attempt.stdout
    assert attempt.stdout.count("Operation not permitted") == 2, attempt.stdout
    assert os.stat(_NULL).st_mode == host_null.st_mode


# -- the runtime's own stdio ------------------------------------------------------------
# crun's run hands its stdin, stdout and stderr to the sandbox's root from the host side:
# started with the host's /dev/null as stdio (as the floor benchmark once did), it made
# every sandbox's root the owner of the host's /dev/null.

_RUNTIMES = [name for name in ("crun", "runc") if shutil.which(name)]


@in_session_loop
@pytest.mark.parametrize("runtime", _RUNTIMES)
async def test_the_benchmark_floor_leaves_the_hosts_dev_null_root(
        runtime: str, template: TemplateImage, data_dir: Path, make_sandbox: SandboxFactory,
        host_null: os.stat_result) -> None:
    """``bench/sandbox_create.py``'s floor (``<runtime> run`` of the product's config on the
    same rootfs) runs, and leaves the host's /dev/null owned by host root."""
    await make_sandbox()  # the data dir and its envd bundle, as the benchmark has them
    single, burst_s = await sandbox_create.measure_floor(runtime, template, data_dir, n=1,
                                                         concurrency=2)
    assert len(single) == 1 and burst_s > 0
    after = os.stat(_NULL)
    assert (after.st_uid, after.st_gid) == (0, 0), f"{runtime} run took the host's /dev/null"


def _null_device(where: Path) -> Path:
    """A second node of the null device (1:3), owned by root: what the host's /dev/null
    is, without risking the host's own."""
    node = where / "null"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    os.chmod(node, 0o666)
    return node


def _bundle(where: Path, rootfs: Path) -> Path:
    (where / "etc").mkdir(parents=True)
    for name in ("hosts", "hostname", "resolv.conf"):
        (where / "etc" / name).write_text("\n")
    plan = SandboxPlan(hostname="stdio", rootfs=rootfs, netns_path="", cgroup_path="/bac/stdio",
                       id_range=IdRange(), limits=Limits(1, 256, 64, True), allow_setuid=False,
                       envd_bundle=None, etc_dir=where / "etc")
    config = build_config(plan)
    config["process"]["args"] = ["/bin/true"]
    for ns in config["linux"]["namespaces"]:
        ns.pop("path", None)
    (where / "config.json").write_text(json.dumps(config))
    return where


@pytest.mark.parametrize("runtime", _RUNTIMES)
def test_a_runtime_is_never_started_with_a_device_as_stdio(
        runtime: str, tmp_path: Path) -> None:
    """Handed a device as stdin or stdout, the backend's runtime start refuses before the
    runtime runs, so no runtime can give the device to a sandbox's root."""
    tmp_path.chmod(0o755)
    node = _null_device(tmp_path)
    (tmp_path / "rootfs").mkdir()
    bundle = _bundle(tmp_path / "bundle", tmp_path / "rootfs")
    binary = shutil.which(runtime)
    assert binary is not None
    argv = [binary, "--root", str(tmp_path / "state"), "run", "--bundle", str(bundle), "stdio"]
    reader, writer = os.pipe()
    device = os.open(node, os.O_RDWR)
    try:
        for fds in ((device, writer, writer), (reader, device, writer)):
            with pytest.raises(RuntimeFailed, match="device"):
                pid = spawn(binary, argv, fds)
                os.waitpid(pid, 0)
    finally:
        for fd in (reader, writer, device):
            os.close(fd)
        subprocess.run([binary, "--root", str(tmp_path / "state"), "delete", "--force", "stdio"],
                       capture_output=True, check=False)
    owner = os.stat(node)
    assert (owner.st_uid, owner.st_gid) == (0, 0), f"{runtime} took the device node"


# -- the start-up check -----------------------------------------------------------------

def test_the_server_refuses_to_start_when_a_host_device_is_not_roots(tmp_path: Path) -> None:
    """``bac serve`` on a host whose /dev/null belongs to the sandbox uid range stops
    before listening, with one line naming the node and the repair. The changed /dev/null
    is a bind in the child's own mount namespace; the host's is never touched."""
    tmp_path.chmod(0o755)
    node = _null_device(tmp_path)
    os.chown(node, IdRange().base, IdRange().base)
    data = tmp_path / "data"
    data.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BAC_", "E2B_"))}
    bac = Path(sys.executable).parent / "bac"
    before = os.stat(_NULL)
    # Its port is taken: a server that did not refuse would fail to listen, not hang.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        env |= {"BAC_DATA_DIR": str(data), "BAC_PORT": str(taken.getsockname()[1]),
                "BAC_POOL_SIZE": "0", "BAC_WARM_TEMPLATES": ""}
        done = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
             'mount --bind "$1" /dev/null && exec "$2" serve', "sh", str(node), str(bac)],
            env=env, capture_output=True, text=True, timeout=120, check=False)
    after = os.stat(_NULL)
    assert (after.st_uid, after.st_gid, after.st_ino) == (before.st_uid, before.st_gid,
                                                          before.st_ino)
    assert done.returncode != 0, done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("bac serve: refusing to start: host device /dev/null is owned by "
                           f"{IdRange().base}:{IdRange().base}, not root"), done.stderr
    assert "`chown root:root /dev/null && chmod 666 /dev/null`" in last
    assert "Uvicorn running" not in done.stderr


def test_the_hosts_device_nodes_pass_the_check() -> None:
    """This host's nodes are the right devices and root's (what every server start checks)."""
    check_device_nodes()
    for node in SANDBOX_DEVICES:
        if os.path.exists(node.path):
            info = os.stat(node.path)
            assert info.st_uid == 0 and (os.major(info.st_rdev), os.minor(info.st_rdev)) == (
                node.major, node.minor)
