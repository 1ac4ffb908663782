"""A sandbox abusing its share leaves its neighbour's commands as fast as they were: the
neighbour's ``run("true")`` through envd, timed while another sandbox runs a fork bomb, a
memory hog the OOM killer keeps ending, a disk fill, eight spinning processes and fd
exhaustion (each its own round), keeps its p99 within a bound of its quiet p99 measured
just before; the abuser is ended after each round, and the neighbour never fails.

Short form (CI): 200 commands a round, p99 within 3x (a busy shared CI host has its own
noise at this sample size; at 80 a round the p99 was the single slowest command, and one
hiccup of the host failed a CI run: 59 ms against 14.9 ms, disk fill). Long form
(``BAC_RELIABILITY=long``): 400 a round, within 2x.
"""

from __future__ import annotations

import time

import pytest
from backend_harness import Sandbox, SandboxFactory
from reliability_forms import LONG

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]

ROUND, BOUND = (400, 2.0) if LONG else (200, 3.0)
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


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


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
    quiet = _p99(await _timed(neighbour, ROUND))
    abuser = await make_sandbox(vcpus=1, memory_mb=256, pids_max=256)
    try:
        started = await abuser.run(ABUSES[abuse])
        assert started.exit_code == 0, started.stderr
        loud = _p99(await _timed(neighbour, ROUND))
    finally:
        await make_sandbox.backend.destroy(abuser.id)
    assert loud <= BOUND * quiet, (
        f"{abuse}: neighbour p99 {loud * 1000:.1f} ms against {quiet * 1000:.1f} ms quiet")
