"""Replicas' announcements and leadership on PostgreSQL (``store.coordination``).

Announcements are ``NOTIFY`` on two channels, sent inside the transaction that wrote (so
they go out when it commits, never for a rolled-back write), payload ``<origin>:<ids>``;
each replica listens on a connection of its own and ignores its own. The leadership is a
session-level advisory lock held on another dedicated connection, checked every few
seconds with a query: a connection that fails is a lost leadership.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from bac_server.store.coordination import OnActivity, OnLeading, OnSandbox
from bac_server.store.sql import schema as t
from bac_server.store.sql._dialect import insert

log = logging.getLogger(__name__)

SANDBOXES = "bac_sandboxes"
ACTIVITY = "bac_activity"
# The leadership's lock: any constant of the advisory lock space no other lock uses.
_LEADER_KEY = sa.func.hashtextextended("bac:leader", 0)
# A NOTIFY payload is at most 8000 bytes: ids go in batches well under it.
_BATCH = 300


async def announce(conn: AsyncConnection, channel: str, origin: str,
                   ids: Sequence[str]) -> None:
    """Inside the caller's transaction (PostgreSQL only)."""
    if conn.dialect.name != "postgresql":
        return
    for start in range(0, len(ids), _BATCH):
        payload = origin + ":" + ",".join(ids[start:start + _BATCH])
        await conn.execute(sa.select(sa.func.pg_notify(channel, payload)))


class SqlCoordination:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._origin = secrets.token_hex(6)

    @property
    def origin(self) -> str:
        return self._origin

    @property
    def _postgresql(self) -> bool:
        return self._engine.dialect.name == "postgresql"

    async def follow(self, on_sandbox: OnSandbox, on_activity: OnActivity) -> None:
        if not self._postgresql:
            await asyncio.Event().wait()  # one process: nobody else announces
        while True:
            try:
                await self._listen(on_sandbox, on_activity)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("listening to the other replicas failed (%s); again in 1 s", exc)
            await asyncio.sleep(1.0)
            on_sandbox("*")

    async def _listen(self, on_sandbox: OnSandbox, on_activity: OnActivity) -> None:
        lost = asyncio.Event()

        def received(_conn: Any, _pid: int, channel: str, payload: str) -> None:
            origin, _, ids = payload.partition(":")
            if origin == self._origin or not ids:
                return
            if channel == SANDBOXES:
                for sandbox_id in ids.split(","):
                    on_sandbox(sandbox_id)
            else:
                on_activity(ids.split(","))

        async with self._engine.connect() as conn:
            raw = (await conn.get_raw_connection()).driver_connection
            assert raw is not None
            raw.add_termination_listener(lambda _conn: lost.set())
            await raw.add_listener(SANDBOXES, received)
            await raw.add_listener(ACTIVITY, received)
            try:
                while not lost.is_set():
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(5.0):
                            await lost.wait()
                    if not lost.is_set():
                        # The connection is alive; committed at once, since a session in
                        # a transaction is told of nothing until it ends.
                        await conn.execute(sa.select(1))
                        await conn.commit()
            finally:
                with contextlib.suppress(Exception):
                    await raw.remove_listener(SANDBOXES, received)
                    await raw.remove_listener(ACTIVITY, received)
        raise ConnectionError("the listening connection was lost")

    async def announce_activity(self, sandbox_ids: Sequence[str]) -> None:
        if not self._postgresql or not sandbox_ids:
            return
        async with self._engine.begin() as conn:
            await announce(conn, ACTIVITY, self._origin, sorted(sandbox_ids))

    async def lead(self, on_leading: OnLeading, retry_s: float = 2.0) -> None:
        if not self._postgresql:
            await on_leading(True)
            await asyncio.Event().wait()
        while True:
            held = False
            try:
                async with self._engine.connect() as conn:
                    try:
                        held = bool((await conn.execute(sa.select(
                            sa.func.pg_try_advisory_lock(_LEADER_KEY)))).scalar_one())
                        await conn.commit()
                        if held:
                            await on_leading(True)
                            while True:  # the session holding the lock is alive
                                await asyncio.sleep(retry_s)
                                await conn.execute(sa.select(1))
                                await conn.commit()
                    finally:
                        if held:
                            # A session lock outlives transactions: released before the
                            # connection goes back to the pool (a lost one is gone anyway).
                            with contextlib.suppress(Exception):
                                await asyncio.shield(conn.execute(sa.select(
                                    sa.func.pg_advisory_unlock(_LEADER_KEY))))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error("the leadership's connection failed: %s", exc)
                if held:
                    await on_leading(False)
                    return
            await asyncio.sleep(retry_s)

    async def take_step(self, sandbox_id: str, until: float) -> bool:
        steps = t.sandbox_steps
        async with self._engine.begin() as conn:
            stmt = insert(conn, steps).values(sandbox_id=sandbox_id, owner=self._origin,
                                              until=until)
            taken = (await conn.execute(stmt.on_conflict_do_update(
                index_elements=[steps.c.sandbox_id],
                set_={"owner": self._origin, "until": until},
                where=sa.or_(steps.c.owner == self._origin, steps.c.until < time.time()),
            ).returning(steps.c.owner))).first()
        return taken is not None

    async def end_step(self, sandbox_id: str) -> None:
        steps = t.sandbox_steps
        async with self._engine.begin() as conn:
            await conn.execute(sa.delete(steps).where(steps.c.sandbox_id == sandbox_id,
                                                      steps.c.owner == self._origin))
