"""Lifecycle events and webhooks: the events API's view of the event log (``_view``), the
E2B shape of an event (``_payload``), a team's webhooks (``_webhooks``), where they may
point (``_destinations``), the delivery signature (``_signature``) and the background
deliverer (``_deliverer``); all of them together (``_services``), which the control
plane starts and stops.
"""

from ._deliverer import DeliverySettings, WebhookDeliverer, retry_delay
from ._destinations import RefusedDestination, Target, WebhookDestinations
from ._payload import payload
from ._services import EventServices
from ._signature import sign, verify
from ._view import DEFAULT_LIMIT, MAX_LIMIT, EventQuery, LifecycleEvents, event_types
from ._webhooks import WebhookChanges, WebhookLimits, Webhooks, WebhookSpec

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "DeliverySettings",
    "EventQuery",
    "EventServices",
    "LifecycleEvents",
    "RefusedDestination",
    "Target",
    "WebhookChanges",
    "WebhookDeliverer",
    "WebhookDestinations",
    "WebhookLimits",
    "WebhookSpec",
    "Webhooks",
    "event_types",
    "payload",
    "retry_delay",
    "sign",
    "verify",
]
