"""Connection options shared by every command (``--api-url``, ``--api-key``), and reaching
one sandbox the way E2B's ``connect`` does: a paused sandbox is resumed, and said so."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

import click

from bac import AsyncSandbox, ConnectionOpts, SandboxInfo, SandboxState
from bac.cli._output import stderr

T = TypeVar("T")

NO_END_YEAR = 9999  # the server's endAt for a sandbox created with timeout 0


def connection(ctx: click.Context) -> ConnectionOpts:
    """The options given to the root command; unset ones come from the environment."""
    return cast(ConnectionOpts, ctx.find_root().obj or {})


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one command's async body to completion."""
    return asyncio.run(coro)


def duration(seconds: float) -> str:
    """``45s``, ``14m05s``, ``3h07m``, ``2d04h``: short enough for a table column."""
    total = int(seconds)
    if total < 60:
        return f"{total}s"
    if total < 3600:
        return f"{total // 60}m{total % 60:02d}s"
    if total < 86400:
        return f"{total // 3600}h{total % 3600 // 60:02d}m"
    return f"{total // 86400}d{total % 86400 // 3600:02d}h"


def ends_in(info: SandboxInfo) -> str:
    """When the sandbox ends, from now: a paused one never does until resumed."""
    if info.state is SandboxState.PAUSED:
        return "never (paused)"
    if info.end_at.year >= NO_END_YEAR:
        return "never"
    seconds = (info.end_at - datetime.now(UTC)).total_seconds()
    return duration(seconds) if seconds >= 1 else "now"


async def attach(ctx: click.Context, sandbox_id: str) -> AsyncSandbox:
    """The sandbox, to run commands or move files in. A paused one is resumed first, as
    E2B's ``connect`` resumes it, with a line on stderr saying so and when it now ends."""
    opts = connection(ctx)
    info = await AsyncSandbox.get_info(sandbox_id, **opts)
    if info.state is not SandboxState.PAUSED:
        return await AsyncSandbox.attach(sandbox_id, **opts)
    stderr.print(f"{sandbox_id} is paused: resuming it…", highlight=False)
    box = await AsyncSandbox.connect(sandbox_id, **opts)
    try:
        now = await box.get_info()
    except BaseException:
        await box.aclose()
        raise
    stderr.print(f"resumed {sandbox_id}; it ends in {ends_in(now)} "
                 "(`bac sandbox timeout` changes that)", highlight=False)
    return box


def in_sandbox(ctx: click.Context, sandbox_id: str,
               body: Callable[[AsyncSandbox], Awaitable[T]]) -> T:
    """Run ``body`` on the sandbox (resumed first if paused, see :func:`attach`), then
    release this process's connections to it; the sandbox keeps running."""
    async def main() -> T:
        box = await attach(ctx, sandbox_id)
        try:
            return await body(box)
        finally:
            await box.aclose()

    return run(main())
