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

__all__ = [
    "ApiKeyRecord",
    "CheckpointRecord",
    "EventRecord",
    "MetricRecord",
    "SandboxRecord",
    "Store",
    "StoreConflict",
    "StoreError",
    "TeamRecord",
]
