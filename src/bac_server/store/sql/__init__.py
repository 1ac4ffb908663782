"""The SQL store: every protocol of :mod:`bac_server.store` on SQLAlchemy Core (async).

:class:`SqlStore` opens one engine, migrates it once and closes it once; each protocol is
served by its own class over that engine (``store.keys`` a :class:`._keys.SqlKeys`, ...),
in a module of its own because each is a consumer's concept (keys, sandboxes, metrics,
checkpoints, the template catalog, builds, uploads, collection, webhooks, the event log
read by team, usage and caps, artefacts, secrets) that shares nothing with the others but the
engine; only the sandbox, checkpoint, webhook and secret classes hold the sealer.

The same classes serve SQLite (the embedded default) and PostgreSQL (a
``postgresql+asyncpg://`` URL): portable Core constructs, and where the engines differ
(upserts, serialised sections, free text) one module says how (:mod:`._dialect`). No
ORM: rows become the frozen records of the protocols' modules right here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from bac_server.store.artefacts import ArtefactStore
from bac_server.store.builds import BuildStore
from bac_server.store.catalog import CatalogStore
from bac_server.store.checkpoints import CheckpointStore
from bac_server.store.gc import GcStore
from bac_server.store.keys import KeyStore
from bac_server.store.metrics import MetricStore
from bac_server.store.nodes import NodeStore
from bac_server.store.sandboxes import EventRecord, SandboxStore
from bac_server.store.sealing import Sealer
from bac_server.store.secrets import SecretStore
from bac_server.store.sql._artefacts import SqlArtefacts
from bac_server.store.sql._builds import SqlBuilds
from bac_server.store.sql._catalog import SqlCatalog
from bac_server.store.sql._checkpoints import SqlCheckpoints
from bac_server.store.sql._coordination import SqlCoordination
from bac_server.store.sql._event_log import SqlEventLog
from bac_server.store.sql._gc import SqlGc
from bac_server.store.sql._keys import SqlKeys
from bac_server.store.sql._metrics import SqlMetrics
from bac_server.store.sql._nodes import SqlNodes
from bac_server.store.sql._sandboxes import SqlSandboxes
from bac_server.store.sql._secrets import SqlSecrets
from bac_server.store.sql._uploads import SqlUploads
from bac_server.store.sql._usage import SqlUsage
from bac_server.store.sql._volumes import SqlVolumes
from bac_server.store.sql._webhooks import SqlWebhooks
from bac_server.store.sql.engine import open_engine, unavailable
from bac_server.store.sql.migrations import migrate
from bac_server.store.uploads import UploadStore
from bac_server.store.usage import UsageStore
from bac_server.store.volumes import VolumeStore
from bac_server.store.webhooks import EventLogStore, WebhookStore

__all__ = ["SqlStore"]


class SqlStore:
    """One engine, one transaction per call. Open with :meth:`open`; ``sealer`` seals the
    secrets of every row written and opens them in every row read."""

    def __init__(self, engine: AsyncEngine, sealer: Sealer,
                 on_lifecycle_event: Callable[[], None] | None = None,
                 on_logged: Callable[[Sequence[EventRecord]], None] | None = None) -> None:
        self._engine = engine
        self.keys: KeyStore = SqlKeys(engine)
        self.coordination = SqlCoordination(engine)
        self.sandboxes: SandboxStore = SqlSandboxes(engine, sealer, on_lifecycle_event,
                                                    on_logged, self.coordination.origin)
        self.metrics: MetricStore = SqlMetrics(engine)
        self.checkpoints: CheckpointStore = SqlCheckpoints(engine, sealer)
        self.catalog: CatalogStore = SqlCatalog(engine)
        self.builds: BuildStore = SqlBuilds(engine)
        self.uploads: UploadStore = SqlUploads(engine)
        self.gc: GcStore = SqlGc(engine)
        self.webhooks: WebhookStore = SqlWebhooks(engine, sealer)
        self.event_log: EventLogStore = SqlEventLog(engine, sealer)
        self.usage: UsageStore = SqlUsage(engine)
        self.artefacts: ArtefactStore = SqlArtefacts(engine)
        self.volumes: VolumeStore = SqlVolumes(engine, sealer)
        self.secrets: SecretStore = SqlSecrets(engine, sealer)
        self.nodes: NodeStore = SqlNodes(engine)

    @classmethod
    async def open(cls, url: str, sealer: Sealer,
                   on_lifecycle_event: Callable[[], None] | None = None,
                   on_logged: Callable[[Sequence[EventRecord]], None] | None = None,
                   ) -> SqlStore:
        """``on_lifecycle_event``: called after each commit that logged a lifecycle event
        (the webhook deliverer's wake-up); ``on_logged``: after each commit that logged
        events, with them as written (the trace's OTLP export)."""
        engine = open_engine(url)
        try:
            await _reach(engine)
            await migrate(engine, sealer)
        except BaseException:
            # A database this server refuses (newer, unreadable): its pooled connection
            # is closed here, not left to the garbage collector.
            await engine.dispose()
            raise
        return cls(engine, sealer, on_lifecycle_event, on_logged)

    async def close(self) -> None:
        await self._engine.dispose()


async def _reach(engine: AsyncEngine) -> None:
    """Connect once: a database that cannot be reached, or refuses this server, is a
    :class:`StoreUnavailable` naming it and why, in one line."""
    try:
        async with engine.connect():
            pass
    # TypeError: a URL query argument asyncpg does not take (libpq's sslmode=, say).
    except (DBAPIError, OSError, TimeoutError, TypeError) as exc:
        cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
        raise unavailable(engine.url, cause) from exc
