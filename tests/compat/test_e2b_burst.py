"""A burst: 50 sandboxes created at once with the official async SDK, whichever way each is
made (handed out from the pool, restored from the template's start snapshot, or booted).

Every one answers; ids, addresses and hostnames are all distinct; each sees its own env
vars and files only. Timing is the benchmark's (``bench/tti.py --concurrent 50``), not
this test's.
"""

from __future__ import annotations

import asyncio

import pytest
from e2b import AsyncSandbox

pytestmark = [pytest.mark.root, pytest.mark.slow]

BURST = 50


async def _one(index: int) -> tuple[AsyncSandbox, str]:
    sbx = await AsyncSandbox.create(timeout=300, envs={"BURST_INDEX": str(index)},
                                    metadata={"burst": str(index)})
    # Each writes a file only it should see, then reports what it is.
    await sbx.files.write("/tmp/mine", f"written by {index}")
    out = await sbx.commands.run(
        "echo $BURST_INDEX; hostname; hostname -I | cut -d' ' -f1; "
        "ls /tmp | grep -c '^mine$'; cat /tmp/mine", timeout=60)
    return sbx, out.stdout


def test_fifty_at_once_all_answer_and_none_sees_another() -> None:
    async def burst() -> list[tuple[AsyncSandbox, str]]:
        made = await asyncio.gather(*(_one(i) for i in range(BURST)), return_exceptions=True)
        boxes = [m[0] for m in made if not isinstance(m, BaseException)]
        errors = [m for m in made if isinstance(m, BaseException)]
        if errors:
            await asyncio.gather(*(b.kill() for b in boxes), return_exceptions=True)
            raise AssertionError(f"{len(errors)} of {BURST} failed: {errors[:3]!r}")
        return [m for m in made if not isinstance(m, BaseException)]

    async def kill(boxes: list[AsyncSandbox]) -> None:
        assert all(await asyncio.gather(*(b.kill() for b in boxes)))

    made = asyncio.run(burst())
    try:
        ids, hostnames, addresses = set(), set(), set()
        for index, (sbx, stdout) in enumerate(made):
            env_index, hostname, address, mine, content = stdout.split("\n")[:5]
            assert env_index == str(index), stdout  # its own env vars, nobody else's
            assert mine == "1" and content == f"written by {index}", stdout
            ids.add(sbx.sandbox_id)
            hostnames.add(hostname)
            addresses.add(address)
            assert hostname == sbx.sandbox_id
        assert len(ids) == len(hostnames) == len(addresses) == BURST
    finally:
        asyncio.run(kill([sbx for sbx, _ in made]))
