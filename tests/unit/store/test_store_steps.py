"""Leases on sandboxes' lifecycle steps (``Coordination.take_step``), on SQLite and
PostgreSQL, and the lock built on them (``control.sandboxes.SandboxLock``): two API
replicas never step on one sandbox at once."""

from __future__ import annotations

import asyncio
import time

from bac_server.control.sandboxes import SandboxLock, StepLeases
from bac_server.store.sealing import Sealer
from bac_server.store.sql import SqlStore

SEALER = Sealer(b"k" * 32)


async def test_a_lease_is_one_replicas_until_given_back_or_expired(database_url: str) -> None:
    one = await SqlStore.open(database_url, SEALER)
    two = await SqlStore.open(database_url, SEALER)
    try:
        a, b = one.coordination, two.coordination
        later = time.time() + 60
        assert await a.take_step("s1", later)
        assert await a.take_step("s1", later + 1)  # its holder extends it
        assert not await b.take_step("s1", later)
        assert await b.take_step("s2", later)  # another sandbox's is another lease
        await b.end_step("s1")  # not b's: nothing given back
        assert not await b.take_step("s1", later)
        await a.end_step("s1")
        assert await b.take_step("s1", later)
        # An expired lease (its holder died) is anyone's.
        assert await a.take_step("s3", time.time() - 1)
        assert await b.take_step("s3", later)
    finally:
        await one.close()
        await two.close()


async def test_a_step_through_one_replica_waits_for_the_others(database_url: str) -> None:
    """Each store is a replica: the second lock on the sandbox is granted only once the
    first is given back, with acquire/release (the kill switch's) as with ``async with``."""
    one = await SqlStore.open(database_url, SEALER)
    two = await SqlStore.open(database_url, SEALER)
    try:
        first, second = SandboxLock(), SandboxLock()
        first.across = StepLeases(one.coordination).across("s1")
        second.across = StepLeases(two.coordination).across("s1")
        order: list[str] = []
        await first.acquire()
        waiting = asyncio.create_task(second.__aenter__())
        # It polls the lease: give it a few rounds, it must still wait.
        for _ in range(5):
            await asyncio.sleep(0.02)
            assert not waiting.done()
        order.append("first done")
        first.release()
        await asyncio.wait_for(waiting, 10)
        order.append("second in")
        assert not await one.coordination.take_step("s1", time.time() + 60)
        await second.__aexit__(None, None, None)
        assert await one.coordination.take_step("s1", time.time() + 60)
        assert order == ["first done", "second in"]
    finally:
        await one.close()
        await two.close()
