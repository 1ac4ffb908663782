"""The events API, the webhooks and their deliverer as one part of the control plane,
made from the stores and settings; the plane starts and stops the deliverer with itself."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from bac_server.host import Destinations
from bac_server.store import EventLogStore, SandboxStore, WebhookStore

from ._deliverer import DeliverySettings, WebhookDeliverer
from ._destinations import WebhookDestinations
from ._view import LifecycleEvents
from ._webhooks import WebhookLimits, Webhooks


@dataclass(frozen=True)
class EventServices:
    events: LifecycleEvents
    webhooks: Webhooks
    deliverer: WebhookDeliverer

    @classmethod
    def create(cls, *, event_log: EventLogStore, sandbox_store: SandboxStore,
               webhook_store: WebhookStore, allowed: Destinations,
               limits: WebhookLimits | None = None, delivery: DeliverySettings | None = None,
               clock: Callable[[], datetime] = lambda: datetime.now(UTC),
               rand: Callable[[], float] = random.random,
               wake: asyncio.Event | None = None) -> EventServices:
        """``allowed``: the destinations webhooks may have beyond the public internet
        (``BAC_WEBHOOK_ALLOW``); ``wake``: set when a lifecycle event is logged (the store
        rings it), so the deliverer reads the log at once instead of at its next poll."""
        destinations = WebhookDestinations(allowed)
        return cls(
            events=LifecycleEvents(event_log=event_log, sandbox_store=sandbox_store,
                                   clock=clock),
            webhooks=Webhooks(store=webhook_store, destinations=destinations,
                              limits=limits or WebhookLimits(), clock=clock),
            deliverer=WebhookDeliverer(webhook_store=webhook_store, event_log=event_log,
                                       destinations=destinations,
                                       settings=delivery or DeliverySettings(),
                                       clock=clock, rand=rand, wake=wake))

    def start(self) -> None:
        self.deliverer.start()

    async def stop(self) -> None:
        await self.deliverer.stop()
