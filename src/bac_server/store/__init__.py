"""Durable state of the control plane, one small protocol per consumer (:mod:`.base`).

Only ``bac_server.app`` names a concrete store (``bac_server.store.sql.SqlStore``).
"""

from bac_server.store.artefacts import ArtefactKind, ArtefactRecord, ArtefactStore
from bac_server.store.base import Store, StoreConflict, StoreError, StoreUnavailable
from bac_server.store.builds import BuildLogRecord, BuildRecord, BuildStore
from bac_server.store.catalog import CatalogStore, SandboxPin, TagRecord, TemplateRecord
from bac_server.store.checkpoints import CheckpointKind, CheckpointRecord, CheckpointStore
from bac_server.store.coordination import Coordination
from bac_server.store.gc import GcStore
from bac_server.store.keys import ApiKeyRecord, KeyStore, TeamRecord
from bac_server.store.metrics import MetricRecord, MetricStore
from bac_server.store.nodes import (
    Chooser,
    NodeLoad,
    NodeRecord,
    NodeState,
    NodeStore,
    PlacedKind,
    Placement,
)
from bac_server.store.sandboxes import (
    EventRecord,
    SandboxChange,
    SandboxRecord,
    SandboxStore,
    TraceQuery,
)
from bac_server.store.secrets import SecretRecord, SecretStore
from bac_server.store.uploads import UploadRecord, UploadStore
from bac_server.store.usage import (
    CapAction,
    CapPeriod,
    CapRecord,
    CapScope,
    GroupBy,
    MeterMark,
    Usage,
    UsageDelta,
    UsageQuery,
    UsageStore,
)
from bac_server.store.volumes import VolumeMountRecord, VolumeRecord, VolumeStore
from bac_server.store.webhooks import (
    Attempt,
    DeliveryQuery,
    DeliveryRecord,
    DeliveryStats,
    EventLogStore,
    LoggedEvent,
    WebhookRecord,
    WebhookStore,
)

__all__ = [
    "ApiKeyRecord",
    "ArtefactKind",
    "ArtefactRecord",
    "ArtefactStore",
    "Attempt",
    "BuildLogRecord",
    "BuildRecord",
    "BuildStore",
    "CapAction",
    "CapPeriod",
    "CapRecord",
    "CapScope",
    "CatalogStore",
    "CheckpointKind",
    "CheckpointRecord",
    "CheckpointStore",
    "Chooser",
    "Coordination",
    "DeliveryQuery",
    "DeliveryRecord",
    "DeliveryStats",
    "EventLogStore",
    "EventRecord",
    "GcStore",
    "GroupBy",
    "KeyStore",
    "LoggedEvent",
    "MeterMark",
    "MetricRecord",
    "MetricStore",
    "NodeLoad",
    "NodeRecord",
    "NodeState",
    "NodeStore",
    "PlacedKind",
    "Placement",
    "SandboxChange",
    "SandboxPin",
    "SandboxRecord",
    "SandboxStore",
    "SecretRecord",
    "SecretStore",
    "Store",
    "StoreConflict",
    "StoreError",
    "StoreUnavailable",
    "TagRecord",
    "TeamRecord",
    "TemplateRecord",
    "TraceQuery",
    "UploadRecord",
    "UploadStore",
    "Usage",
    "UsageDelta",
    "UsageQuery",
    "UsageStore",
    "VolumeMountRecord",
    "VolumeRecord",
    "VolumeStore",
    "WebhookRecord",
    "WebhookStore",
]
