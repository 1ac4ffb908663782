"""Inserting rows whose keys must be new: the one place a database's integrity error
becomes the store's :class:`bac_server.store.base.StoreConflict`."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bac_server.store.base import StoreConflict


@contextlib.asynccontextmanager
async def inserting(engine: AsyncEngine, what: str) -> AsyncIterator[AsyncConnection]:
    """One transaction; a key that already exists rolls it back and raises
    ``StoreConflict("<what> exists")``."""
    try:
        async with engine.begin() as conn:
            yield conn
    except IntegrityError as exc:
        raise StoreConflict(f"{what} exists") from exc
