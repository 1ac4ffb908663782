"""The webhook deliverer in process, on a real SQLite store and a real receiver on
loopback, driven one step at a time on an injected clock: retries wait for their backoff
(and no longer), give up after the attempts allowed, a 4xx is not retried; a row the
cursor had passed (a late commit) is still delivered and nothing is owed twice; a warning
written to the log is delivered like any lifecycle event."""

from __future__ import annotations

import asyncio
import queue
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from webhook_receiver import Receiver, e2b_signature, receiving

from bac_server.control import Team
from bac_server.control.events import (
    DeliverySettings,
    EventQuery,
    EventServices,
    WebhookSpec,
)
from bac_server.control.sandboxes import EventKind, event, warning
from bac_server.host import Destinations
from bac_server.store import DeliveryQuery, SandboxRecord
from bac_server.store.sealing import Sealer, is_sealed
from bac_server.store.sql import SqlStore, schema
from bac_server.store.sql.engine import open_engine

T0 = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
TEAM = Team("team", "team")
SECRET = "unit-secret"
CREATED = "sandbox.lifecycle.created"


@dataclass
class Clock:
    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as found:
        yield found


@dataclass
class World:
    store: SqlStore
    services: EventServices
    clock: Clock
    url: str


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'bac.db'}"
    store = await SqlStore.open(url, Sealer(Sealer.new_key()))
    await store.keys.ensure_team("team")
    clock = Clock()
    services = EventServices.create(
        event_log=store.event_log, sandbox_store=store.sandboxes, webhook_store=store.webhooks,
        allowed=Destinations.parse("127.0.0.1"), clock=clock, rand=lambda: 0.0,
        delivery=DeliverySettings(backoff_s=10, max_backoff_s=40, max_attempts=3,
                                  max_age_s=3600, rescan_s=60, timeout_s=2))
    services.deliverer.open()
    try:
        yield World(store, services, clock, url)
    finally:
        await services.stop()
        await store.close()


def _sandbox(sandbox_id: str) -> SandboxRecord:
    return SandboxRecord(
        sandbox_id=sandbox_id, team_id="team", template_id="base", alias=None,
        state="running", started_at=T0, end_at=T0 + timedelta(minutes=5), cpu_count=2,
        memory_mb=512, disk_mb=1024, envd_access_token="tok", traffic_access_token=None,
        metadata={"run": "r1"})


async def _created(world: World, sandbox_id: str) -> None:
    await world.store.sandboxes.insert_sandbox(
        _sandbox(sandbox_id), event(sandbox_id, "team", EventKind.CREATED, "created"))


async def _step(world: World) -> None:
    """One step of the deliverer, and the sends it started, to their end."""
    await world.services.deliverer.step()
    await world.services.deliverer.settle()


def _drained(receiver: Receiver) -> list[Any]:
    found = []
    try:
        while True:
            found.append(receiver.arrivals.get_nowait())
    except queue.Empty:
        return found


async def _only_delivery(world: World, hook_id: str) -> Any:
    found = await world.store.webhooks.deliveries("team", hook_id, DeliveryQuery(limit=10))
    assert len(found) == 1
    return found[0]


async def test_retries_wait_for_their_backoff_on_the_clock(world: World,
                                                           receiver: Receiver) -> None:
    receiver.answer("/r", 500, 502)
    hook = await world.services.webhooks.create(TEAM, WebhookSpec(
        url=receiver.url("/r"), events=[CREATED], secret=SECRET))
    await _created(world, "s1")

    async def step() -> None:
        await _step(world)

    await step()
    assert [a.status for a in _drained(receiver)] == [500]
    first = await _only_delivery(world, hook.webhook_id)
    assert (first.status, first.attempts, first.response_code) == ("pending", 1, 500)
    assert first.next_attempt_at == T0 + timedelta(seconds=10)  # backoff_s, no jitter drawn
    await step()
    world.clock.advance(9.9)
    await step()
    assert _drained(receiver) == []  # not due yet: nothing sent
    world.clock.advance(0.1)
    await step()
    assert [a.status for a in _drained(receiver)] == [502]
    second = await _only_delivery(world, hook.webhook_id)
    assert second.next_attempt_at == world.clock.now + timedelta(seconds=20)  # doubled
    world.clock.advance(20)
    await step()
    arrivals = _drained(receiver)
    assert [a.status for a in arrivals] == [200]
    assert arrivals[0].headers["e2b-signature"] == e2b_signature(SECRET, arrivals[0].body)
    done = await _only_delivery(world, hook.webhook_id)
    assert (done.status, done.attempts, done.response_code) == ("success", 3, 200)
    world.clock.advance(3600)
    await step()
    assert _drained(receiver) == []  # delivered: never sent again


async def test_gives_up_after_the_attempts_allowed_and_at_once_on_a_4xx(
        world: World, receiver: Receiver) -> None:
    receiver.answer("/down", 500, 500, 500, 500)
    receiver.answer("/gone", 410)
    down = await world.services.webhooks.create(TEAM, WebhookSpec(
        url=receiver.url("/down"), events=[CREATED], secret=SECRET))
    gone = await world.services.webhooks.create(TEAM, WebhookSpec(
        url=receiver.url("/gone"), events=[CREATED], secret=SECRET))
    await _created(world, "s2")
    for _ in range(4):
        await _step(world)
        world.clock.advance(100)
    arrivals = _drained(receiver)
    assert sorted(a.path for a in arrivals) == ["/down"] * 3 + ["/gone"]
    failed = await _only_delivery(world, down.webhook_id)
    assert (failed.status, failed.attempts, failed.last_error) == (
        "failed", 3, "the receiver answered 500")
    refused = await _only_delivery(world, gone.webhook_id)
    assert (refused.status, refused.attempts, refused.response_code) == ("failed", 1, 410)
    stats = await world.services.webhooks.stats(TEAM, down.webhook_id, since=None,
                                                until=None)
    assert (stats.total, stats.failed, stats.success) == (1, 1, 0)


async def test_a_late_commit_is_delivered_and_nothing_twice(world: World,
                                                           receiver: Receiver) -> None:
    """An event whose id is below the cursor (a transaction that committed after a higher
    id was read) is found by the re-scan; re-scanning owes nothing already owed."""
    hook = await world.services.webhooks.create(TEAM, WebhookSpec(
        url=receiver.url("/late"), events=[CREATED], secret=SECRET))
    for sid in ("a", "b"):
        await world.store.sandboxes.insert_sandbox(_sandbox(sid))
    engine = open_engine(world.url)
    c = schema.sandbox_events.c

    async def logged(event_id: int, sandbox_id: str) -> None:
        async with engine.begin() as conn:
            await conn.execute(sa.insert(schema.sandbox_events).values(
                event_id=event_id, sandbox_id=sandbox_id, team_id="team",
                at=world.clock.now.timestamp(), kind="created", level="info",
                message="created", fields={}, wire_type=CREATED))

    try:
        await logged(100, "a")
        await logged(102, "b")
        await _step(world)
        assert await world.store.webhooks.cursor() == 102
        await logged(101, "late")  # committed after 102 was read
        async with engine.connect() as conn:
            assert (await conn.execute(sa.select(sa.func.count()).where(
                c.event_id == 101))).scalar() == 1
        await _step(world)
        await _step(world)
    finally:
        await engine.dispose()
    got = [a.json()["sandboxId"] for a in _drained(receiver)]
    assert sorted(got) == ["a", "b", "late"]
    owed = await world.store.webhooks.deliveries("team", hook.webhook_id,
                                                DeliveryQuery(limit=10))
    assert sorted(d.event_id for d in owed) == [100, 101, 102]


async def test_a_warning_is_an_event_and_is_delivered(world: World,
                                                      receiver: Receiver) -> None:
    """The hook the caps will use: a warning written to the event log is listed by the
    events API (Bac's type) and delivered to the webhooks that ask for it."""
    hook = await world.services.webhooks.create(TEAM, WebhookSpec(
        url=receiver.url("/warn"), events=["bac.sandbox.warning"], secret=SECRET))
    await _created(world, "w1")
    await world.store.sandboxes.add_event(warning("w1", "team", "80 % of the daily cap",
                                                  cap="daily", used_pct="80"))
    await _step(world)
    arrivals = _drained(receiver)
    assert len(arrivals) == 1  # the created event is not asked for
    body = arrivals[0].json()
    assert body["type"] == "bac.sandbox.warning" and body["sandboxId"] == "w1"
    assert body["eventData"]["message"] == "80 % of the daily cap"
    assert body["eventData"]["fields"] == {"cap": "daily", "used_pct": "80"}
    assert body["eventData"]["sandbox_metadata"] == {"run": "r1"}
    listed = await world.services.events.of_team(
        TEAM, EventQuery(types=("bac.sandbox.warning",)), "w1")
    assert listed == [body]
    assert (await _only_delivery(world, hook.webhook_id)).status == "success"



async def test_a_silent_receiver_holds_up_only_its_own_deliveries(
        world: World, receiver: Receiver) -> None:
    """While one webhook's receiver gives no answer, the deliverer goes on: another
    webhook gets this event and the next one, the silent one's attempt still in flight."""
    gate = receiver.hold("/silent")
    silent = await world.services.webhooks.create(TEAM, WebhookSpec(
        url=receiver.url("/silent"), events=[CREATED], secret=SECRET))
    await world.services.webhooks.create(TEAM, WebhookSpec(
        url=receiver.url("/fast"), events=[CREATED], secret=SECRET))
    try:
        for sandbox_id in ("f1", "f2"):
            await _created(world, sandbox_id)
            await world.services.deliverer.step()  # starts the sends, does not wait
            arrival = await asyncio.to_thread(receiver.until, lambda a: a.path == "/fast")
            assert arrival[-1].json()["sandboxId"] == sandbox_id
        in_flight = await world.store.webhooks.deliveries("team", silent.webhook_id,
                                                          DeliveryQuery(limit=10))
        assert [(d.status, d.attempts) for d in in_flight] == [("pending", 0)] * 2
    finally:
        gate.set()
    await world.services.deliverer.settle()
    await _step(world)  # the silent webhook's second event, skipped while it was busy
    owed = await world.store.webhooks.deliveries("team", silent.webhook_id,
                                                DeliveryQuery(limit=10))
    assert [(d.status, d.attempts) for d in owed] == [("success", 1), ("success", 1)]


async def test_an_attempt_has_one_deadline(world: World, receiver: Receiver) -> None:
    """A receiver that never answers is cut at ``timeout_s`` and the delivery retried."""
    gate = receiver.hold("/never")
    hook = await world.services.webhooks.create(TEAM, WebhookSpec(
        url=receiver.url("/never"), events=[CREATED], secret=SECRET))
    await _created(world, "n1")
    try:
        await _step(world)
    finally:
        gate.set()
    cut = await _only_delivery(world, hook.webhook_id)
    assert (cut.status, cut.attempts, cut.last_error) == ("pending", 1, "no answer in 2 s")


async def test_the_secret_is_sealed_at_rest(world: World, receiver: Receiver) -> None:
    """The database holds the signature secret sealed, bound to its webhook: a copy of the
    file without the key file reads no secret."""
    hook = await world.services.webhooks.create(TEAM, WebhookSpec(
        url=receiver.url("/sealed"), events=[CREATED], secret="a-very-particular-secret"))
    engine = open_engine(world.url)
    try:
        async with engine.connect() as conn:
            stored = (await conn.execute(sa.select(schema.webhooks.c.secret).where(
                schema.webhooks.c.webhook_id == hook.webhook_id))).scalar_one()
    finally:
        await engine.dispose()
    assert is_sealed(stored) and "a-very-particular-secret" not in stored
    assert (await world.store.webhooks.get_webhook("team", hook.webhook_id)).secret == \
        "a-very-particular-secret"
    assert await world.store.webhooks.get_webhook("other", hook.webhook_id) is None



def _certificate(directory: Path, name: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", f"/CN={name}", "-addext",
                    f"subjectAltName=DNS:{name}"], check=True, capture_output=True)
    return cert, key


async def test_https_is_checked_against_the_urls_name(world: World, tmp_path: Path) -> None:
    """Delivery connects to the address it checked, yet an https receiver's certificate
    is verified against the URL's name: one for that name (its CA trusted through
    ``ca_file``) is delivered to, one for another name is refused and retried."""
    right = _certificate(tmp_path, "localhost")
    wrong = _certificate(tmp_path, "elsewhere.test")
    trusted = tmp_path / "trusted.pem"
    trusted.write_bytes(right[0].read_bytes() + wrong[0].read_bytes())
    services = EventServices.create(
        event_log=world.store.event_log, sandbox_store=world.store.sandboxes,
        webhook_store=world.store.webhooks, allowed=Destinations.parse("127.0.0.1"),
        clock=world.clock, rand=lambda: 0.0,
        delivery=DeliverySettings(timeout_s=5, ca_file=trusted))
    services.deliverer.open()
    try:
        with receiving(tls=right) as good, receiving(tls=wrong) as bad:
            ok = await services.webhooks.create(TEAM, WebhookSpec(
                url=good.url("/tls", "localhost", "https"), events=[CREATED], secret=SECRET))
            refused = await services.webhooks.create(TEAM, WebhookSpec(
                url=bad.url("/tls", "localhost", "https"), events=[CREATED], secret=SECRET))
            await _created(world, "tls1")
            await services.deliverer.step()
            await services.deliverer.settle()
            arrivals = _drained(good)
            assert len(arrivals) == 1 and arrivals[0].headers["host"] == f"localhost:{good.port}"
            assert _drained(bad) == []
    finally:
        await services.stop()
    assert (await _only_delivery(world, ok.webhook_id)).status == "success"
    failed = await _only_delivery(world, refused.webhook_id)
    assert failed.status == "pending" and "CERTIFICATE_VERIFY_FAILED" in (failed.last_error or "")


async def test_a_logged_event_wakes_the_deliverer(tmp_path: Path, receiver: Receiver) -> None:
    """The store rings the deliverer when it logs a lifecycle event: with a poll of a
    minute, the event still reaches the receiver at once (waited for with a bound far
    under the poll); a trace-only entry does not ring."""
    wake = asyncio.Event()
    store = await SqlStore.open(f"sqlite+aiosqlite:///{tmp_path / 'bac.db'}",
                                Sealer(Sealer.new_key()), on_lifecycle_event=wake.set)
    await store.keys.ensure_team("team")
    services = EventServices.create(
        event_log=store.event_log, sandbox_store=store.sandboxes,
        webhook_store=store.webhooks, allowed=Destinations.parse("127.0.0.1"),
        delivery=DeliverySettings(poll_s=60), wake=wake)
    try:
        await services.webhooks.create(TEAM, WebhookSpec(
            url=receiver.url("/rung"), events=[CREATED], secret=SECRET))
        await store.sandboxes.add_event(event("s7", "team", EventKind.STARTED, "started"))
        assert not wake.is_set()  # not a lifecycle event: no ring
        await store.sandboxes.add_event(event("s7", "team", EventKind.KILLED, "killed"))
        assert wake.is_set()
        wake.clear()
        services.start()
        await services.deliverer.parked()  # it looked (an empty log) and waits a minute
        await store.sandboxes.insert_sandbox(
            _sandbox("s8"), event("s8", "team", EventKind.CREATED, "created"))
        arrival = await asyncio.to_thread(receiver.next, 10.0)
        assert arrival.json()["sandboxId"] == "s8"
    finally:
        await services.stop()
        await store.close()
