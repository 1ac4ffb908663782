"""Resource limits hold against hostile workloads, and the host and neighbours keep working."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from backend_harness import SandboxFactory, footprint, leftovers

from bac_server.backends.namespaces import NamespaceBackend, testing
from bac_server.host import PARENT_CGROUP

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]

MEMORY_HOG = """
chunks = []
while True:
    chunks.append(bytearray(8 << 20))  # bytearray pages are written: really resident
"""

FORK_COUNTER = """
import os, signal, time
children = []
try:
    for _ in range(10_000):
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        children.append(pid)
except BlockingIOError:
    pass
print(len(children))
for pid in children:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
"""

SPINNERS = """
import multiprocessing, time
def spin(deadline):
    while time.monotonic() < deadline:
        pass
deadline = time.monotonic() + 3
procs = [multiprocessing.Process(target=spin, args=(deadline,)) for _ in range(4)]
for p in procs: p.start()
for p in procs: p.join()
"""


# Forks children that each keep 8 MiB (less than envd holds), reaping the ones the OOM
# killer ends and forking again: memory stays at the limit for as long as it runs.
MEMORY_FORK_BOMB = """
import os, time
while True:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
    try:
        pid = os.fork()
    except OSError:
        continue
    if pid == 0:
        block = bytearray(8 << 20)
        while True:
            time.sleep(60)
"""


def _cgroup_value(cgroup_dirs: tuple[Path, ...], controller: str, name: str) -> str:
    for path in cgroup_dirs:
        if path.parent.parent.name == controller:
            return (path / name).read_text()
    raise AssertionError(f"no {controller} cgroup")


async def test_memory_hog_is_oom_killed(backend: NamespaceBackend,
                                        make_sandbox: SandboxFactory) -> None:
    """A process allocating past the limit is OOM-killed; envd, a neighbour and the host live on."""
    sbx = await make_sandbox(memory_mb=128)
    neighbour = await make_sandbox()
    result = await sbx.python(MEMORY_HOG, user="user", limit_s=120)
    # envd reports a signal death as E2B does: exit code -1, error "signal: killed"
    assert result.exit_code != 0 and "killed" in (result.error or ""), result
    fp = footprint(backend, sbx.id)
    assert int(_cgroup_value(fp.cgroups, "memory", "memory.max_usage_in_bytes")) \
        <= 128 * 1024 * 1024
    oom = _cgroup_value(fp.cgroups, "memory", "memory.oom_control")
    assert int(oom.split("oom_kill ")[1].split()[0]) >= 1
    assert await sbx.health() == 204
    assert (await sbx.run("echo still here")).stdout.strip() == "still here"
    assert (await neighbour.run("echo fine")).stdout.strip() == "fine"
    assert bytearray(64 << 20)  # the host can still allocate


def _envd(backend: NamespaceBackend, sandbox_id: str) -> tuple[int, int]:
    """envd's host pid and start time: the child of the sandbox's keeper (pid 1) that
    runs bac_envd."""
    keeper = testing.init_pid(backend, sandbox_id)
    for child in Path(f"/proc/{keeper}/task/{keeper}/children").read_text().split():
        if b"bac_envd" in Path(f"/proc/{child}/cmdline").read_bytes():
            stat = Path(f"/proc/{child}/stat").read_text()
            return int(child), int(stat[stat.rindex(")") + 2:].split()[19])
    raise AssertionError("no envd under the keeper")


def _oom_kills(backend: NamespaceBackend, sandbox_id: str) -> int:
    oom = _cgroup_value(footprint(backend, sandbox_id).cgroups, "memory",
                        "memory.oom_control")
    return int(oom.split("oom_kill ")[1].split()[0])


async def test_envds_children_are_the_oom_killers_first_choice(
        backend: NamespaceBackend, make_sandbox: SandboxFactory) -> None:
    """Everything envd starts runs at oom_score_adj 1000, envd stays at its floor (0 or
    below), and neither the user nor root inside can lower a score below that floor."""
    sbx = await make_sandbox()
    score = Path(f"/proc/{testing.init_pid(backend, sbx.id)}/oom_score_adj")
    envd_score = int(await asyncio.to_thread(score.read_text))
    assert envd_score <= 0
    for user in ("user", "root"):
        result = await sbx.run("cat /proc/self/oom_score_adj", user=user)
        assert result.stdout.strip() == "1000", (user, result)
    # Raising is free, lowering below the floor needs CAP_SYS_RESOURCE on the host.
    lowered = await sbx.run("echo -1 > /proc/self/oom_score_adj", user="root")
    assert lowered.exit_code != 0 and "Permission denied" in lowered.stderr, lowered
    legacy = await sbx.run("echo -17 > /proc/self/oom_adj", user="root")
    assert legacy.exit_code != 0, legacy
    assert (await sbx.run("sudo sh -c 'echo -1000 > /proc/self/oom_score_adj'")
            ).exit_code != 0


async def test_a_memory_fork_bomb_is_killed_before_envd(
        backend: NamespaceBackend, make_sandbox: SandboxFactory) -> None:
    """A fork bomb whose children each hold memory drives a 128 MiB sandbox into its OOM
    killer again and again; the killer takes the bomb's processes, never envd, which
    answers throughout and runs commands once the bomb is stopped."""
    sbx = await make_sandbox(memory_mb=128)
    envd = _envd(backend, sbx.id)
    await sbx.sdk.files.write("/tmp/bomb.py", MEMORY_FORK_BOMB, user="user")
    bomb = await sbx.sdk.commands.run("python3 /tmp/bomb.py", background=True, user="user")
    deadline = time.monotonic() + 120
    while _oom_kills(backend, sbx.id) < 20:
        assert time.monotonic() < deadline, "the bomb never reached the memory limit"
        assert await sbx.health(limit_s=10) == 204
        await asyncio.sleep(0.2)  # polling the kernel's counter, bounded by the deadline
    assert await sbx.health(limit_s=10) == 204
    await bomb.kill()
    result = await sbx.run("echo still here", user="root", limit_s=60)
    assert result.stdout.strip() == "still here", result
    # envd itself was never killed (its keeper would have started another).
    assert _envd(backend, sbx.id) == envd


async def test_fork_bomb_stops_at_the_pids_limit(backend: NamespaceBackend,
                                                 make_sandbox: SandboxFactory) -> None:
    """Forking stops at pids_max; a real fork bomb is contained and destroy still cleans up."""
    sbx = await make_sandbox(pids_max=64)
    neighbour = await make_sandbox()
    counted = await sbx.python(FORK_COUNTER, user="user")
    assert counted.exit_code == 0, counted.stderr
    assert 0 < int(counted.stdout) < 64
    # Now the classic bomb, left running: the sandbox stays full until it is destroyed.
    await sbx.run("(bash -c ':(){ :|:& };:' >/dev/null 2>&1 &) ; true", limit_s=20)
    fp = footprint(backend, sbx.id)
    assert int(_cgroup_value(fp.cgroups, "pids", "pids.current")) <= 64
    host_fork = await asyncio.create_subprocess_exec("true")
    assert await host_fork.wait() == 0  # the host can still fork
    assert (await neighbour.run("echo fine")).stdout.strip() == "fine"
    await backend.destroy(sbx.id)
    assert leftovers(fp) == []


async def test_pids_limit_scales_with_memory(backend: NamespaceBackend,
                                             make_sandbox: SandboxFactory) -> None:
    """A sandbox's pids.max is 256 + 4 per MiB of its memory (768 at 128 MiB, 2304 at the
    default 512 MiB), never more than the pids_max it asked for."""
    small = await make_sandbox(memory_mb=128)
    default = await make_sandbox()
    capped = await make_sandbox(memory_mb=512, pids_max=1000)
    for sbx, expected in ((small, 768), (default, 2304), (capped, 1000)):
        fp = footprint(backend, sbx.id)
        assert int(_cgroup_value(fp.cgroups, "pids", "pids.max")) == expected, sbx.id


def _sysctl(name: str) -> int:
    return int(Path("/proc/sys", *name.split(".")).read_text())


async def test_all_sandboxes_together_stay_below_the_hosts_task_table(
        backend: NamespaceBackend) -> None:
    """The parent cgroup of every sandbox holds them together to 75 % of the tasks the
    kernel allows (threads-max, far below the raised pid_max), so sandboxes each within
    their own limit can never stop the host forking."""
    parents = [Path("/sys/fs/cgroup/pids", PARENT_CGROUP), Path("/sys/fs/cgroup", PARENT_CGROUP)]
    ceiling = next(p / "pids.max" for p in parents if (p / "pids.max").is_file())
    tasks = min(_sysctl("kernel.threads-max"), _sysctl("kernel.pid_max"))
    assert int(ceiling.read_text()) == int(tasks * 0.75)
    assert int(ceiling.read_text()) < _sysctl("kernel.threads-max")


async def test_cpu_spinner_gets_its_quota(backend: NamespaceBackend,
                                          make_sandbox: SandboxFactory) -> None:
    """Four busy loops in a 1-vCPU sandbox get at most ~1 CPU-second per wall second."""
    sbx = await make_sandbox(vcpus=1)
    fp = footprint(backend, sbx.id)
    usage_before = int(_cgroup_value(fp.cgroups, "cpuacct", "cpuacct.usage"))
    started = time.monotonic()
    result = await sbx.python(SPINNERS, user="user")
    wall = time.monotonic() - started
    assert result.exit_code == 0, result.stderr
    used = (int(_cgroup_value(fp.cgroups, "cpuacct", "cpuacct.usage")) - usage_before) / 1e9
    assert used <= 1.15 * wall, (used, wall)
    # Whether it was also throttled depends on what else the host runs meanwhile: a busy
    # host may never give it a full CPU. The bound above is what the quota guarantees.
    assert _cgroup_value(fp.cgroups, "cpu", "cpu.cfs_quota_us").strip() == "10000"


async def test_neighbours_do_not_share_limits(make_sandbox: SandboxFactory) -> None:
    """Each sandbox has its own limits: a busy neighbour does not consume another's pids."""
    small = await make_sandbox(pids_max=32)
    other = await make_sandbox(pids_max=32)
    await small.run("for i in $(seq 20); do sleep 60 & done; true")
    result = await other.run("for i in $(seq 20); do sleep 60 & done; echo ok")
    assert result.stdout.strip() == "ok"
    await asyncio.gather(small.run("pkill sleep; true"), other.run("pkill sleep; true"))
