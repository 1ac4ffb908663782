"""The sync twin's plumbing: one loop thread runs coroutines; class/instance dual methods."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from bac import AsyncSandbox, Sandbox
from bac._dual import dual_method
from bac._portal import Portal


def test_portal_runs_on_one_background_thread() -> None:
    """Every call runs on the same named loop thread and returns its value."""
    portal = Portal()

    async def where() -> str:
        await asyncio.sleep(0)
        return threading.current_thread().name

    assert {portal.run(where()) for _ in range(3)} == {"bac-sdk-loop"}


def test_portal_propagates_exceptions() -> None:
    """An exception inside the coroutine is raised to the blocking caller."""
    portal = Portal()

    async def boom() -> None:
        raise KeyError("inside")

    with pytest.raises(KeyError, match="inside"):
        portal.run(boom())


def test_portal_refuses_reentry_from_its_own_thread() -> None:
    """A sync call made from a callback on the loop thread fails instead of deadlocking."""
    portal = Portal()

    async def reenter() -> None:
        async def inner() -> None:
            return None

        portal.run(inner())

    with pytest.raises(RuntimeError, match="AsyncSandbox"):
        portal.run(reenter())


class _Thing:
    def _by_id(cls: Any, /, ident: str) -> str:
        return f"{cls.__name__}:{ident}"

    def _own(self, suffix: str = "") -> str:
        """Own docstring."""
        return f"instance{suffix}"

    op = dual_method(_by_id, _own)


def test_dual_method_dispatches_on_access() -> None:
    """The same name is a by-id call on the class and a self call on an instance."""
    assert _Thing.op("x") == "_Thing:x"
    assert _Thing().op("!") == "instance!"
    assert _Thing.__dict__["op"].__doc__ == "Own docstring."


@pytest.mark.parametrize("name", ["kill", "set_timeout", "get_info"])
def test_sandbox_classes_offer_both_spellings(name: str) -> None:
    """AsyncSandbox and Sandbox expose kill/set_timeout/get_info on class and instance."""
    for cls in (AsyncSandbox, Sandbox):
        assert isinstance(cls.__dict__[name], dual_method)
