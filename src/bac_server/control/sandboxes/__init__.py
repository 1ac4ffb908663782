"""Sandboxes in the control plane: their lifecycle from create to end, what the API and
the gateway read of them, and what they leave in the store.

* ``_states``: ``SandboxState`` and its transition table.
* ``_registry``: ``Registry``, every live sandbox in memory (``LiveSandbox``) and the
  gateway's routes.
* ``_creation``: ``Creator``, a create in one line (validate, resolve, count and reserve,
  record and start at once, arm its timeout).
* ``_lifecycle``: ``Lifecycle``, timeouts, kill, connect and refresh, pause and resume.
* ``_idle``: ``IdleWatch``, the idle policy (pause, or end, a sandbox left alone).
* ``_observer``: ``LifecycleObserver``, what the lifecycle reports to its metrics.
* ``_pausing``: which pause this backend gives, and automatic resume on traffic.
* ``_specs``: the backend's view of an existing sandbox, for the steps that start it again.
* ``_reconcile``: the store against what the backend holds, at start-up.
* ``_network``: egress policies from the wire, their change at runtime, traffic usage.
* ``_listing``: filters, order and cursor pagination of a listing.
* ``_events``: the event log's kinds (``EventKind``), entries, and the kinds' types on the
  events API and webhooks (``WIRE_TYPES``).
* ``_history``: the event log and resource samples of a sandbox, also after its end.
* ``_sampler``: ``MetricsSampler``, resource samples taken periodically (the latest of
  each running sandbox kept in memory).
* ``_feed``: ``ChangeFeed``, the registry's changes to many readers (the live fleet).
* ``_trace``: ``Traces``, the event log as a trace (by sandbox or by run, paged, followed
  live), fed also by envd's reports from inside (``TraceIntake``), and its retention.
"""

from ._creation import CreateRequest, Creator, IdlePolicy
from ._events import (
    EVENT_TYPES,
    WIRE_TYPES,
    EndReason,
    EventKind,
    event,
    warning,
    wire_type,
)
from ._feed import Change, ChangeFeed, Subscription
from ._health import HealthSettings, HealthWatch, envd_prober
from ._history import History
from ._idle import IdleWatch
from ._kill_switch import KillSwitch, Selector, SwitchResult
from ._lifecycle import Lifecycle
from ._listing import MAX_LIMIT, Cursor, ListQuery, page
from ._network import NetworkService, NetworkUpdate, egress_policy, policy_of
from ._observer import LifecycleObserver
from ._pausing import CAP_HOLD
from ._reconcile import ReconcileReport, reconcile
from ._registry import NO_END, LiveSandbox, OnTimeout, Registry, Route
from ._replicas import Replicas
from ._sampler import MetricsSampler
from ._specs import spec_of
from ._states import (
    LIVE_STATES,
    VISIBLE_STATES,
    InvalidTransition,
    SandboxState,
    can_transition,
    check_transition,
)
from ._steps import SandboxLock, StepLeases
from ._trace import TraceFilter, TraceIntake, Traces, TraceSettings

__all__ = [
    "CAP_HOLD",
    "EVENT_TYPES",
    "LIVE_STATES",
    "MAX_LIMIT",
    "NO_END",
    "VISIBLE_STATES",
    "WIRE_TYPES",
    "Change",
    "ChangeFeed",
    "CreateRequest",
    "Creator",
    "Cursor",
    "EndReason",
    "EventKind",
    "HealthSettings",
    "HealthWatch",
    "History",
    "IdlePolicy",
    "IdleWatch",
    "InvalidTransition",
    "KillSwitch",
    "Lifecycle",
    "LifecycleObserver",
    "ListQuery",
    "LiveSandbox",
    "MetricsSampler",
    "NetworkService",
    "NetworkUpdate",
    "OnTimeout",
    "ReconcileReport",
    "Registry",
    "Replicas",
    "Route",
    "SandboxLock",
    "SandboxState",
    "Selector",
    "StepLeases",
    "Subscription",
    "SwitchResult",
    "TraceFilter",
    "TraceIntake",
    "TraceSettings",
    "Traces",
    "can_transition",
    "check_transition",
    "egress_policy",
    "envd_prober",
    "event",
    "page",
    "policy_of",
    "reconcile",
    "spec_of",
    "warning",
    "wire_type",
]
