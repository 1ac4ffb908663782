"""``Events``: the blocking twin of :class:`AsyncEvents`, method for method."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Unpack

from bac._config import ConnectionOpts
from bac._events import AsyncEvents, LifecycleEvent, Webhook, WebhookDelivery
from bac._portal import PORTAL


async def _make(opts: ConnectionOpts) -> AsyncEvents:
    return AsyncEvents(**opts)


class Events:
    """A team's lifecycle events and webhooks, with blocking calls; see
    :class:`AsyncEvents`.

    ::

        with Events() as events:
            for event in events.sandbox(sandbox.sandbox_id, ascending=True):
                print(event.type)
    """

    def __init__(self, **opts: Unpack[ConnectionOpts]) -> None:
        # Made on the portal's loop, which is where its connection pool will be used.
        self._inner = PORTAL.run(_make(opts))

    def close(self) -> None:
        PORTAL.run(self._inner.aclose())

    def __enter__(self) -> Events:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def sandbox(self, sandbox_id: str, *, types: Sequence[str] = (), limit: int = 10,
                offset: int = 0, ascending: bool = False) -> builtins.list[LifecycleEvent]:
        return PORTAL.run(self._inner.sandbox(sandbox_id, types=types, limit=limit,
                                              offset=offset, ascending=ascending))

    def team(self, *, types: Sequence[str] = (), limit: int = 10, offset: int = 0,
             ascending: bool = False) -> builtins.list[LifecycleEvent]:
        return PORTAL.run(self._inner.team(types=types, limit=limit, offset=offset,
                                           ascending=ascending))

    def create_webhook(self, url: str, events: Sequence[str], *, secret: str, name: str = "",
                       enabled: bool = True) -> Webhook:
        return PORTAL.run(self._inner.create_webhook(url, events, secret=secret, name=name,
                                                     enabled=enabled))

    def webhooks(self) -> builtins.list[Webhook]:
        return PORTAL.run(self._inner.webhooks())

    def webhook(self, webhook_id: str) -> Webhook:
        return PORTAL.run(self._inner.webhook(webhook_id))

    def update_webhook(self, webhook_id: str, *, name: str | None = None,
                       url: str | None = None, events: Sequence[str] | None = None,
                       enabled: bool | None = None, secret: str | None = None) -> Webhook:
        return PORTAL.run(self._inner.update_webhook(webhook_id, name=name, url=url,
                                                     events=events, enabled=enabled,
                                                     secret=secret))

    def delete_webhook(self, webhook_id: str) -> bool:
        return PORTAL.run(self._inner.delete_webhook(webhook_id))

    def deliveries(self, webhook_id: str, *, limit: int = 20) -> builtins.list[WebhookDelivery]:
        return PORTAL.run(self._inner.deliveries(webhook_id, limit=limit))
