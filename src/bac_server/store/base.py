"""The store as a whole: the interfaces one database serves, and the store's error tree.

Each consumer in the control plane asks for the interfaces it uses (:mod:`.keys`,
:mod:`.sandboxes`, :mod:`.metrics`, :mod:`.checkpoints`, :mod:`.catalog`, :mod:`.builds`,
:mod:`.uploads`, :mod:`.gc`, :mod:`.webhooks`, :mod:`.usage`,
:mod:`.artefacts`, :mod:`.secrets`); only the composition root
holds a whole :class:`Store`. The embedded default is SQLite (:mod:`bac_server.store.sql`);
the same SQL classes serve PostgreSQL (``BAC_DATABASE_URL``). Only ``bac_server.app``
names a concrete store.

Error tree (server side, store layer)::

    StoreError
    ├── StoreConflict     a row with this key already exists
    ├── StoreUnavailable  the database cannot be reached or refuses the server (at start)
    └── MigrationError    the database is newer than this server, or a step failed
                          (``store.sql.migrations``)
"""

from __future__ import annotations

from typing import Protocol

from bac_server.store.artefacts import ArtefactStore
from bac_server.store.builds import BuildStore
from bac_server.store.catalog import CatalogStore
from bac_server.store.checkpoints import CheckpointStore
from bac_server.store.coordination import Coordination
from bac_server.store.gc import GcStore
from bac_server.store.keys import KeyStore
from bac_server.store.metrics import MetricStore
from bac_server.store.nodes import NodeStore
from bac_server.store.sandboxes import SandboxStore
from bac_server.store.secrets import SecretStore
from bac_server.store.uploads import UploadStore
from bac_server.store.usage import UsageStore
from bac_server.store.volumes import VolumeStore
from bac_server.store.webhooks import EventLogStore, WebhookStore


class StoreError(Exception):
    """Base class of every store failure."""


class StoreConflict(StoreError):
    """The row to insert already exists."""


class StoreUnavailable(StoreError):
    """The database is unreachable, or refuses the server (no such database, a wrong
    password): the message says which, in one line."""


class Store(Protocol):
    """Durable state of the control plane: one database serving every interface, opened
    and closed as a whole by the composition root."""

    @property
    def keys(self) -> KeyStore: ...

    @property
    def sandboxes(self) -> SandboxStore: ...

    @property
    def metrics(self) -> MetricStore: ...

    @property
    def checkpoints(self) -> CheckpointStore: ...

    @property
    def catalog(self) -> CatalogStore: ...

    @property
    def builds(self) -> BuildStore: ...

    @property
    def uploads(self) -> UploadStore: ...

    @property
    def gc(self) -> GcStore: ...

    @property
    def webhooks(self) -> WebhookStore: ...

    @property
    def event_log(self) -> EventLogStore: ...

    @property
    def usage(self) -> UsageStore: ...

    @property
    def artefacts(self) -> ArtefactStore: ...

    @property
    def volumes(self) -> VolumeStore: ...

    @property
    def secrets(self) -> SecretStore: ...

    @property
    def nodes(self) -> NodeStore: ...

    @property
    def coordination(self) -> Coordination: ...

    async def close(self) -> None: ...
