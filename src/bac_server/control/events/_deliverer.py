"""The webhook deliverer: a background task of the control plane that turns events into
deliveries and sends them, signed, retried with backoff, each attempt logged.

Owing: the deliverer reads the event log past its cursor (and again the last
``rescan_s`` before it, a guard should an event commit after one with a higher id was
read: the SQL store hands ids out in commit order on PostgreSQL too, ``store/sql/
_dialect.py``) and, for every enabled webhook of the event's team that asks
for its type and existed when it happened, owes one delivery. A delivery is unique per
(webhook, event) and written with the cursor in one transaction, so a re-scan or a
restart never owes an event twice and a crash never loses one.

Sending: a webhook's due deliveries go one at a time, in the order owed; each is POSTed
to the checked address of its webhook's URL (:mod:`._destinations`) with headers
``e2b-webhook-id``, ``e2b-delivery-id`` (the same on every attempt: the receiver's key to
drop a repeat), ``e2b-signature-version`` and ``e2b-signature`` (:mod:`._signature`). A
2xx is a success; a 5xx, 408, 429, a timeout or a connection error is retried after
``backoff_s * 2**(n-1)`` seconds (at most ``max_backoff_s``, less up to half at random),
until ``max_attempts`` attempts or ``max_age_s`` since the event; any other answer, or a
URL refused, fails it at once. Its state is written after each attempt, so a restart
resumes where it was and never sends a delivered event again (a crash between a
receiver's 2xx and that write can repeat one: the delivery id says so). Bodies are read
by no one: only the status code is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import secrets
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from bac_server.store import (
    Attempt,
    DeliveryRecord,
    EventLogStore,
    LoggedEvent,
    WebhookRecord,
    WebhookStore,
)

from ._destinations import RefusedDestination, WebhookDestinations
from ._payload import payload
from ._signature import VERSION, sign

log = logging.getLogger(__name__)

_RETRIED_CODES = frozenset({408, 429})
_MAX_ERROR_CHARS = 300


@dataclass(frozen=True)
class DeliverySettings:
    poll_s: float = 1.0  # how often the event log is read for new events
    timeout_s: float = 10.0  # one attempt, connect to status line
    max_attempts: int = 5
    max_age_s: float = 3600.0  # no attempt after this long since the event
    backoff_s: float = 10.0  # the first retry's delay; doubled for each further one
    max_backoff_s: float = 600.0
    rescan_s: float = 60.0
    concurrency: int = 8
    batch: int = 200
    max_body_bytes: int = 64 * 1024
    retention_s: float = 7 * 86_400.0  # finished deliveries kept this long
    # CA certificates (PEM) trusted for https receivers besides the host's trust store.
    ca_file: Path | None = None


def retry_delay(attempts: int, settings: DeliverySettings, rand: Callable[[], float]) -> float:
    """Seconds before the next attempt after ``attempts`` failed ones: exponential, capped,
    with up to half taken off at random (so receivers that failed together are not all
    retried at once)."""
    full = min(settings.max_backoff_s, settings.backoff_s * 2 ** max(0, attempts - 1))
    return float(full * (1 - rand() / 2))


def _short(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return text[:_MAX_ERROR_CHARS]


class WebhookDeliverer:
    def __init__(self, *, webhook_store: WebhookStore, event_log: EventLogStore,
                 destinations: WebhookDestinations, settings: DeliverySettings,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 rand: Callable[[], float] = random.random,
                 wake: asyncio.Event | None = None) -> None:
        """``wake``: set by whoever logs an event (the store); the deliverer then reads the
        log at once. It polls every ``poll_s`` anyway (other writers, a missed ring)."""
        self._store = webhook_store
        self._event_log = event_log
        self._destinations = destinations
        self.settings = settings
        self._clock = clock
        self._rand = rand
        self._task: asyncio.Task[None] | None = None
        self._wake = wake if wake is not None else asyncio.Event()
        self._client: httpx.AsyncClient | None = None
        self._last_prune: datetime | None = None
        self._sending: dict[str, asyncio.Task[None]] = {}  # by webhook id
        self._parked = asyncio.Event()  # set while the loop waits for a ring or its poll
        self._gate = asyncio.Semaphore(settings.concurrency)

    # running ------------------------------------------------------------------------------
    def open(self) -> None:
        """Make the HTTP client (``start`` does; a caller driving ``step`` itself calls
        this, and ``stop`` after)."""
        if self._client is None:
            trusted = ssl.create_default_context()  # the host's trust store
            if self.settings.ca_file is not None:
                trusted.load_verify_locations(cafile=self.settings.ca_file)
            self._client = httpx.AsyncClient(
                timeout=self.settings.timeout_s, follow_redirects=False, trust_env=False,
                verify=trusted,
                limits=httpx.Limits(max_connections=self.settings.concurrency * 2))

    def start(self) -> None:
        self.open()
        self._task = asyncio.create_task(self._run(), name="webhook-deliverer")

    async def parked(self) -> None:
        """Wait until the loop has looked at the log and waits for a ring or its poll."""
        await self._parked.wait()

    def wake(self) -> None:
        """Look at the log now rather than at the next poll."""
        self._wake.set()

    async def stop(self) -> None:
        """Stop reading and sending; an attempt cut short stays pending (sent again at
        the next start, with the same delivery id)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for task in list(self._sending.values()):
            task.cancel()
        await asyncio.gather(*list(self._sending.values()), return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _run(self) -> None:
        while True:
            try:
                await self.step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("webhook delivery step failed; trying again")
            self._parked.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.settings.poll_s)
            self._parked.clear()
            self._wake.clear()  # before the step: a ring during it is not lost

    async def step(self) -> None:
        """Owe what the log holds, start sending what is due (``settle`` waits for it),
        and forget old deliveries."""
        hooks = await self._store.enabled_webhooks()
        await self._owe(hooks)
        due = await self._store.due(self._clock(), self.settings.batch, skip=set(self._sending))
        self._dispatch(due, {h.webhook_id: h for h in hooks})
        now = self._clock()
        if self._last_prune is None or now - self._last_prune > timedelta(hours=1):
            self._last_prune = now
            await self._store.prune_deliveries(
                now - timedelta(seconds=self.settings.retention_s))

    # owing --------------------------------------------------------------------------------
    def _owed(self, events: list[LoggedEvent], hooks: list[WebhookRecord]
              ) -> list[DeliveryRecord]:
        now = self._clock()
        owed = []
        for logged in events:
            e = logged.event
            body: str | None = None
            for hook in hooks:
                if (hook.team_id != e.team_id or e.wire_type not in hook.events
                        or e.at < hook.created_at):
                    continue
                if body is None:
                    body = json.dumps(payload(logged), separators=(",", ":"))
                owed.append(DeliveryRecord(
                    delivery_id=secrets.token_hex(16), webhook_id=hook.webhook_id,
                    team_id=hook.team_id, event_id=logged.event_id,
                    event_type=e.wire_type or "", body=body, created_at=now,
                    next_attempt_at=now))
        return owed

    async def _owe(self, hooks: list[WebhookRecord]) -> None:
        if not hooks:
            return
        cursor = await self._store.cursor()
        teams = {h.team_id for h in hooks}
        types = {t for h in hooks for t in h.events}
        oldest_hook = min(h.created_at for h in hooks)
        batch = self.settings.batch
        rescan = max(oldest_hook, self._clock() - timedelta(seconds=self.settings.rescan_s))
        recent = await self._event_log.events_for_delivery(
            team_ids=teams, types=types, after_id=0, up_to_id=cursor, since=rescan,
            limit=batch * 4, newest_first=True)  # the nearest the cursor: the likeliest late
        if recent:
            await self._store.owe(self._owed(recent, hooks), cursor)
        while True:
            new = await self._event_log.events_for_delivery(
                team_ids=teams, types=types, after_id=cursor, since=oldest_hook, limit=batch)
            if not new:
                return
            cursor = max(cursor, max(e.event_id for e in new))
            await self._store.owe(self._owed(new, hooks), cursor)
            if len(new) < batch:
                return

    # sending ------------------------------------------------------------------------------
    def _dispatch(self, due: list[DeliveryRecord], hooks: dict[str, WebhookRecord]) -> None:
        """Each webhook's due deliveries one after another, in the order owed (so a
        receiver sees a sandbox's events in order unless one is retried), in a task of
        the webhook's own: a slow or dead receiver holds up only its own deliveries.
        A webhook whose task still runs gets no new one (``due`` skips its deliveries)."""
        queues: dict[str, list[DeliveryRecord]] = {}
        for delivery in sorted(due, key=lambda d: d.seq):
            queues.setdefault(delivery.webhook_id, []).append(delivery)
        for webhook_id, deliveries in queues.items():
            task = asyncio.create_task(self._in_order(hooks.get(webhook_id), deliveries),
                                       name=f"webhook-{webhook_id}")
            self._sending[webhook_id] = task
            task.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task[None]) -> None:
        for webhook_id, running in list(self._sending.items()):
            if running is task:
                del self._sending[webhook_id]
        if not task.cancelled() and task.exception() is not None:
            log.error("webhook sending failed", exc_info=task.exception())
        # Deliveries owed while the webhook was busy were skipped: look again now.
        self._wake.set()

    async def _in_order(self, hook: WebhookRecord | None,
                        deliveries: list[DeliveryRecord]) -> None:
        async with self._gate:
            for delivery in deliveries:
                if not await self._attempt(delivery, hook):
                    return  # the receiver is failing: the rest wait for their next turn

    async def settle(self) -> None:
        """Wait for every send in flight (the tests' step, then its outcome)."""
        while self._sending:
            await asyncio.gather(*list(self._sending.values()), return_exceptions=True)

    async def _attempt(self, delivery: DeliveryRecord, hook: WebhookRecord | None) -> bool:
        """One attempt, its outcome written; False when it failed and will be retried."""
        started = time.monotonic()
        code: int | None = None
        error: str | None = None
        retry = False
        if hook is None:
            error = "the webhook is disabled"
        elif len(delivery.body) > self.settings.max_body_bytes:
            error = f"the event is larger than {self.settings.max_body_bytes} bytes"
        else:
            try:
                code = await self._post(delivery, hook)
                if not 200 <= code < 300:
                    error = f"the receiver answered {code}"
                    retry = code >= 500 or code in _RETRIED_CODES
            except RefusedDestination as exc:
                error = str(exc)
            except TimeoutError:
                error, retry = f"no answer in {self.settings.timeout_s:g} s", True
            except (httpx.TimeoutException, httpx.TransportError, OSError) as exc:
                error, retry = _short(exc), True
        now = self._clock()
        attempts = delivery.attempts + 1
        duration_ms = round((time.monotonic() - started) * 1000)
        if error is None:
            status, next_at = "success", now
        else:
            next_at = now + timedelta(seconds=retry_delay(attempts, self.settings, self._rand))
            too_old = next_at - delivery.created_at > timedelta(seconds=self.settings.max_age_s)
            status = "pending" if retry and attempts < self.settings.max_attempts \
                and not too_old else "failed"
        await self._store.record_attempt(delivery.delivery_id, Attempt(
            status=status, attempts=attempts, at=now, next_attempt_at=next_at,
            response_code=code, error=error, duration_ms=duration_ms))
        if status == "failed":
            log.info("webhook delivery %s failed after %d attempts: %s",
                     delivery.delivery_id, attempts, error)
        return status != "pending"

    async def _post(self, delivery: DeliveryRecord, hook: WebhookRecord) -> int:
        assert self._client is not None, "the deliverer is not started"
        target = await self._destinations.target(hook.url)
        body = delivery.body.encode()
        headers = {
            "Host": target.host_header,
            "Content-Type": "application/json",
            "User-Agent": "bac-webhooks/1",
            "e2b-webhook-id": hook.webhook_id,
            "e2b-delivery-id": delivery.delivery_id,
            "e2b-signature-version": VERSION,
            "e2b-signature": sign(hook.secret, body),
        }
        request = self._client.build_request(
            "POST", target.url, content=body, headers=headers,
            extensions={"sni_hostname": target.server_name})
        # One deadline for the whole attempt: a receiver that dribbles its answer byte by
        # byte cannot hold a delivery longer than timeout_s.
        async with asyncio.timeout(self.settings.timeout_s):
            response = await self._client.send(request, stream=True)
            await response.aclose()  # the status is all that is kept; the body is not read
        return response.status_code
