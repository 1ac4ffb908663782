"""What the collection of template storage asks, in SQL
(:class:`bac_server.store.gc.GcStore`): queries over the sandbox, checkpoint, build, tag
and pin tables together."""

from __future__ import annotations

from collections.abc import Collection

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bac_server.store.sql import schema as t


def _live(live_states: Collection[str]) -> sa.Select[tuple[str]]:
    """The ids of sandboxes in one of ``live_states``."""
    return sa.select(t.sandboxes.c.sandbox_id).where(t.sandboxes.c.state.in_(list(live_states)))


def _saved() -> sa.Select[tuple[str]]:
    """The ids of sandboxes with a checkpoint or snapshot: it still needs their layers to
    start from."""
    return sa.select(t.checkpoints.c.sandbox_id)


class SqlGc:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def live_digests(self, live_states: Collection[str]) -> set[str]:
        builds, tags, pins = t.template_builds.c, t.template_tags.c, t.sandbox_templates.c
        tagged = (sa.select(builds.digest)
                  .join(t.template_tags, tags.build_id == builds.build_id)
                  .where(builds.status == "ready", builds.digest.is_not(None)))
        known = sa.select(t.sandboxes.c.sandbox_id)
        pinned = sa.select(pins.digest).where(sa.or_(
            pins.sandbox_id.in_(_live(live_states)), pins.sandbox_id.in_(_saved()),
            pins.sandbox_id.not_in(known)))
        async with self._engine.connect() as conn:
            found = {r[0] for r in (await conn.execute(tagged)).all()}
            found.update(r[0] for r in (await conn.execute(pinned)).all())
        return {str(d) for d in found if d}

    async def prune_pins(self, live_states: Collection[str]) -> int:
        pinned = t.sandbox_templates.c.sandbox_id
        query = sa.delete(t.sandbox_templates).where(pinned.not_in(_live(live_states)),
                                                     pinned.not_in(_saved()))
        async with self._engine.begin() as conn:
            return (await conn.execute(query)).rowcount
