"""A sandbox abusing its share leaves its neighbour's commands as fast as they were: the
neighbour's ``run("true")`` through envd, timed while another sandbox runs a fork bomb, a
memory hog the OOM killer keeps ending, a disk fill, eight spinning processes and fd
exhaustion (each its own round), keeps its tail latency within a bound of the same
measure taken quiet just before; the abuser is ended after each round, and the neighbour
never fails.

Long form (``BAC_RELIABILITY=long``, the figure docs/security.md reports): 400 commands a
round, p99 within 2x. Short form (CI): 200 a round, p95 within 3x. A shared CI host's own
hiccups reach the top 1 % of a short round: its p99 missed 3x twice in full CI runs (disk
fill 59 ms and fd exhaustion 50 ms, against 15 ms quiet) while runs here gave 1.2-2.4x;
the p95 still catches a neighbour slowed for real (the 100 ms CPU period this test found
slowed every command of the round).
"""

from __future__ import annotations

import time

import pytest
from backend_harness import Sandbox, SandboxFactory
from reliability_forms import LONG

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]

ROUND, BOUND, TAIL = (400, 2.0, 0.99) if LONG else (200, 3.0, 0.95)
# Each started in the background inside the abuser, as its user; each runs until the
# sandbox ends.
ABUSES = {
    "fork bomb": "bash -c 'b() { b | b & }; b' >/dev/null 2>&1 &",
    # Touched, not only reserved: every page counts against the limit.
    "memory hog": ("(while :; do python3 -c 'b = b\"x\" * (1 << 30)'; done) "
                   ">/dev/null 2>&1 &"),
    "disk fill": ("(while :; do dd if=/dev/zero of=/tmp/fill bs=1M count=1024 "
                  "conv=fsync; rm -f /tmp/fill; done) >/dev/null 2>&1 &"),
    "spinners": "for i in 1 2 3 4 5 6 7 8; do (while :; do :; done) & done",
    "fd exhaustion": ("(while :; do python3 -c \"import os\n"
                      "fds = []\nwhile True:\n    fds.append(os.open('/dev/null', os.O_RDONLY))\""
                      "; done) >/dev/null 2>&1 &"),
}


def _tail(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * TAIL))]


async def _timed(sbx: Sandbox, n: int) -> list[float]:
    took = []
    for _ in range(n):
        began = time.perf_counter()
        result = await sbx.run("true")
        took.append(time.perf_counter() - began)
        assert result.exit_code == 0, result.stderr
    return took


@pytest.mark.parametrize("abuse", sorted(ABUSES))
async def test_a_neighbours_commands_keep_their_pace(make_sandbox: SandboxFactory,
                                                     abuse: str) -> None:
    neighbour = await make_sandbox(vcpus=1, memory_mb=256)
    await _timed(neighbour, 10)  # its first commands load envd's services
    quiet = _tail(await _timed(neighbour, ROUND))
    abuser = await make_sandbox(vcpus=1, memory_mb=256, pids_max=256)
    try:
        started = await abuser.run(ABUSES[abuse])
        assert started.exit_code == 0, started.stderr
        loud = _tail(await _timed(neighbour, ROUND))
    finally:
        await make_sandbox.backend.destroy(abuser.id)
    assert loud <= BOUND * quiet, (
        f"{abuse}: neighbour p{TAIL * 100:.0f} {loud * 1000:.1f} ms against "
        f"{quiet * 1000:.1f} ms quiet")
