"""Connection options shared by every command (``--api-url``, ``--api-key``)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar, cast

import click

from bac import ConnectionOpts

T = TypeVar("T")


def connection(ctx: click.Context) -> ConnectionOpts:
    """The options given to the root command; unset ones come from the environment."""
    return cast(ConnectionOpts, ctx.find_root().obj or {})


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one command's async body to completion."""
    return asyncio.run(coro)
