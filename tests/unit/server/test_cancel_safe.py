"""``bac_server.cancel_safe``: a step awaited through it finishes before its cancelled
caller sees the cancellation, however often the caller is cancelled."""

from __future__ import annotations

import asyncio
import signal
import threading

import pytest

from bac_server.cancel_safe import end_child, off_loop, to_the_end


async def test_step_finishes_before_a_twice_cancelled_caller_returns() -> None:
    started, release = asyncio.Event(), asyncio.Event()
    finished: list[str] = []

    async def step() -> str:
        started.set()
        await release.wait()
        finished.append("step")
        return "done"

    caller = asyncio.create_task(to_the_end(step()))
    await started.wait()
    caller.cancel()
    await asyncio.sleep(0)  # lets the first cancellation reach the caller
    caller.cancel()
    await asyncio.sleep(0)
    assert not caller.done(), "the caller gave up before its step finished"
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert finished == ["step"]


async def test_a_step_failing_after_the_cancel_leaves_the_caller_cancelled() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def step() -> None:
        started.set()
        await release.wait()
        raise OSError("the step's own failure")

    caller = asyncio.create_task(to_the_end(step()))
    await started.wait()
    caller.cancel()
    await asyncio.sleep(0)
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await caller


async def test_off_loop_waits_for_its_thread() -> None:
    entered, leave = threading.Event(), threading.Event()
    left = threading.Event()

    def work() -> int:
        entered.set()
        leave.wait(10)
        left.set()
        return 7

    assert await off_loop(lambda: 7) == 7
    caller = asyncio.create_task(off_loop(work))
    await asyncio.to_thread(entered.wait, 10)
    caller.cancel()
    await asyncio.sleep(0)
    assert not caller.done()
    leave.set()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert left.is_set(), "the cancelled caller returned while its thread still ran"


async def test_end_child_reaps_the_child_before_a_cancelled_caller_returns() -> None:
    proc = await asyncio.create_subprocess_exec("sleep", "60")
    caller = asyncio.create_task(end_child(proc))
    await asyncio.sleep(0)  # end_child has killed the child and waits for it
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert proc.returncode == -signal.SIGKILL, "the caller returned before the child was reaped"
    await end_child(proc)  # an ended child: nothing to kill, its status is kept
    assert proc.returncode == -signal.SIGKILL
