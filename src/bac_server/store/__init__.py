"""Durable state of the control plane behind the :class:`Store` protocol.

Only ``bac_server.app`` names a concrete store (``bac_server.store.sql.SqlStore``).
"""

from bac_server.store.base import Store, StoreConflict, StoreError
from bac_server.store.records import (
    ApiKeyRecord,
    CheckpointRecord,
    EventRecord,
    MetricRecord,
    SandboxRecord,
    TeamRecord,
)
from bac_server.store.template_records import (
    BuildLogRecord,
    BuildRecord,
    SandboxPin,
    TagRecord,
    TemplateRecord,
    UploadRecord,
)

__all__ = [
    "ApiKeyRecord",
    "BuildLogRecord",
    "BuildRecord",
    "CheckpointRecord",
    "EventRecord",
    "MetricRecord",
    "SandboxPin",
    "SandboxRecord",
    "Store",
    "StoreConflict",
    "StoreError",
    "TagRecord",
    "TeamRecord",
    "TemplateRecord",
    "UploadRecord",
]
