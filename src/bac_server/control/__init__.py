"""The control plane: sandbox lifecycle, tenancy and API keys, independent of transport.

``api`` and ``gateway`` call into this package; it calls the backend contract
(``bac_server.backends.base``), templates and the store protocol.
"""

from bac_server.control.creation import CreateRequest, Creator, TemplateSource
from bac_server.control.errors import (
    Conflict,
    ControlError,
    InvalidRequest,
    NotFound,
    NotSupported,
    PauseFailed,
    QuotaExceeded,
    ResumeFailed,
    SandboxCreateFailed,
    SandboxNotFoundError,
    TeamLimitExceeded,
    TemplateNotFoundError,
    Unauthenticated,
)
from bac_server.control.events import EventKind
from bac_server.control.history import History
from bac_server.control.keys import KeyInfo, KeyService, Team
from bac_server.control.lifecycle import Lifecycle
from bac_server.control.limits import Limits
from bac_server.control.listing import MAX_LIMIT, Cursor, ListQuery, page
from bac_server.control.network import NetworkService, NetworkUpdate, egress_policy, policy_of
from bac_server.control.plane import ControlPlane
from bac_server.control.reconcile import ReconcileReport, reconcile
from bac_server.control.registry import LiveSandbox, Registry, Route
from bac_server.control.sampler import MetricsSampler
from bac_server.control.states import SandboxState

__all__ = [
    "MAX_LIMIT",
    "Conflict",
    "ControlError",
    "ControlPlane",
    "CreateRequest",
    "Creator",
    "Cursor",
    "EventKind",
    "History",
    "InvalidRequest",
    "KeyInfo",
    "KeyService",
    "Lifecycle",
    "Limits",
    "ListQuery",
    "LiveSandbox",
    "MetricsSampler",
    "NetworkService",
    "NetworkUpdate",
    "NotFound",
    "NotSupported",
    "PauseFailed",
    "QuotaExceeded",
    "ReconcileReport",
    "Registry",
    "ResumeFailed",
    "Route",
    "SandboxCreateFailed",
    "SandboxNotFoundError",
    "SandboxState",
    "Team",
    "TeamLimitExceeded",
    "TemplateNotFoundError",
    "TemplateSource",
    "Unauthenticated",
    "egress_policy",
    "page",
    "policy_of",
    "reconcile",
]
