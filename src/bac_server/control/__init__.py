"""The control plane: sandbox lifecycle, tenancy and API keys, independent of transport.

``api`` and ``gateway`` call into this package; it calls the backend contract
(``bac_server.backends.base``), templates and the store protocol.
"""

from bac_server.backends.base import PauseKind
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
from bac_server.control.keys import KeyInfo, KeyService, Team
from bac_server.control.limits import Limits
from bac_server.control.plane import ControlPlane, TemplateServices
from bac_server.control.sandboxes import (
    MAX_LIMIT,
    CreateRequest,
    Creator,
    Cursor,
    EventKind,
    History,
    Lifecycle,
    ListQuery,
    LiveSandbox,
    MetricsSampler,
    NetworkService,
    NetworkUpdate,
    OnTimeout,
    ReconcileReport,
    Registry,
    Route,
    SandboxState,
    egress_policy,
    page,
    policy_of,
    reconcile,
)
from bac_server.control.templates import TemplateSource

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
    "OnTimeout",
    "PauseFailed",
    "PauseKind",
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
    "TemplateServices",
    "TemplateSource",
    "Unauthenticated",
    "egress_policy",
    "page",
    "policy_of",
    "reconcile",
]
