"""Several API replicas over one database (docs/scale-out.md, ``bac serve --role api``).

Each replica keeps every live sandbox in its registry, whoever created or changed it:
when another replica writes a sandbox's row, the store announces it
(``store.Coordination``) and this replica reads the row again and applies it: a new
sandbox is added (with its route, asked of the backend), a changed one takes the row's
state, end and settings, an ended one leaves. Its own writes it already holds.

What must run once runs in the leader only, the replica holding the store's leadership
lock: timers (timeouts, idle policies), health checks, sampling, metering, caps, webhook
deliveries, scheduled checkpoints, and the sweep of sandboxes no row claims. The others
serve requests; the leader learns of their traffic from their announcements (every
second, the sandboxes active through them), so an idle policy never pauses a sandbox
busy through another replica. A leader whose lock's session is lost stops acting at once
(``on_leading(False)``): another may already hold it.

Not serialised across replicas: two lifecycle steps on one sandbox at the same instant
through two replicas (each holds only its own lock); the backend's steps are idempotent
or refused, and the row that lands last is what every replica ends with.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence

from bac_server.backends.base import Backend, BackendError
from bac_server.store import Coordination, SandboxRecord, SandboxStore

from ._lifecycle import Lifecycle
from ._reconcile import ask_route
from ._registry import LiveSandbox, Registry, Route
from ._states import LIVE_STATES, Health, SandboxState

log = logging.getLogger(__name__)

ACTIVITY_EVERY_S = 1.0


class Replicas:
    def __init__(self, *, coordination: Coordination, sandbox_store: SandboxStore,
                 registry: Registry, backend: Backend, lifecycle: Lifecycle,
                 sweep_s: float = 60.0) -> None:
        """``sweep_s``: between two of the leader's sweeps. A sandbox the backend holds but
        no live row claims is destroyed only when two sweeps in a row found it so (a
        create in flight on another replica writes its row within a second or two)."""
        self._sweep_s = sweep_s
        self._coordination = coordination
        self._store = sandbox_store
        self._registry = registry
        self._backend = backend
        self._lifecycle = lifecycle
        self._pending: set[str] = set()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._suspects: set[str] = set()
        self._routing: set[str] = set()
        self._retries: set[asyncio.Task[None]] = set()
        self._catching_up = asyncio.Lock()
        self._lifecycle.leading = False

    @property
    def leading(self) -> bool:
        """Whether this replica leads (held as ``Lifecycle.leading``, which its timers
        and the loops that run once ask)."""
        return self._lifecycle.leading

    def start(self, on_leading: Callable[[bool], Awaitable[None]]) -> None:
        async def leadership(leading: bool) -> None:
            self._lifecycle.leading = leading
            if leading:
                self._tasks.append(asyncio.create_task(self._sweep_forever()))
            await on_leading(leading)

        self._registry.take_active()  # from now on the registry keeps this replica's activity
        self._tasks += [
            asyncio.create_task(self._coordination.follow(self._changed, self._touched)),
            asyncio.create_task(self._apply_forever()),
            asyncio.create_task(self._announce_forever()),
            asyncio.create_task(self._coordination.lead(leadership)),
        ]

    async def close(self) -> None:
        for task in [*self._tasks, *self._retries]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._retries, return_exceptions=True)

    # -- the other replicas' changes -------------------------------------------------

    def _changed(self, sandbox_id: str) -> None:
        self._pending.add(sandbox_id)
        self._wake.set()

    def _touched(self, sandbox_ids: Sequence[str]) -> None:
        for sandbox_id in sandbox_ids:
            self._registry.touch(sandbox_id)

    async def _apply_forever(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            pending, self._pending = self._pending, set()
            if "*" in pending:
                pending = await self._everything()
            for sandbox_id in sorted(pending):
                try:
                    await self.apply(sandbox_id)
                except Exception:
                    log.exception("following sandbox %s's change failed", sandbox_id)

    async def _everything(self) -> set[str]:
        """After an interruption: every sandbox this replica holds or the store has live."""
        rows = await self._store.sandboxes_in_states([s.value for s in LIVE_STATES])
        return {r.sandbox_id for r in rows} | {s.sandbox_id for s in self._registry.all()}

    async def apply(self, sandbox_id: str) -> None:
        """Make this replica's view of the sandbox its row's."""
        rec = await self._store.get_sandbox(sandbox_id)
        sbx = self._registry.get(sandbox_id)
        if sbx is None:
            if rec is None or SandboxState(rec.state) not in LIVE_STATES:
                return
            now = LiveSandbox.from_record(rec)
            if now.state is SandboxState.RUNNING:
                await self._route(now)
            if self._registry.get(sandbox_id) is not None:
                await self.apply(sandbox_id)  # added meanwhile (a request's catch-up)
                return
            self._registry.add(now)
            self._lifecycle.arm(now)
            self._followed(now)
            self._route_later(now)
            return
        async with sbx.lock.here:
            await self._take_row(sbx, rec)
        self._route_later(sbx)

    async def refreshed(self, sandbox_id: str) -> None:
        """The sandbox's row applied to this replica's view, now: called by a step of
        this replica holding the sandbox's lock, once its lease is taken (another
        replica's step may have changed the sandbox just before, and its announcement
        waits for this lock)."""
        sbx = self._registry.get(sandbox_id)
        if sbx is not None:
            await self._take_row(sbx, await self._store.get_sandbox(sandbox_id))

    async def _take_row(self, sbx: LiveSandbox, rec: SandboxRecord | None) -> None:
        """Under the sandbox's lock."""
        if rec is None or SandboxState(rec.state) not in LIVE_STATES:
            sbx.state = SandboxState(rec.state) if rec is not None else SandboxState.KILLED
            self._lifecycle.arm(sbx)  # cancels its timers
            self._registry.remove(sbx.sandbox_id)
            return
        now = LiveSandbox.from_record(rec)
        was = sbx.state
        for name in ("state", "end_at", "metadata", "network", "allow_internet_access",
                     "on_timeout", "pause_memory", "auto_resume", "paused_as",
                     "timeout_s", "checkpoint_every_s", "checkpoint_keep",
                     "idle_after_s", "idle_cpu_pct", "idle_action", "held",
                     "saved_bytes"):
            setattr(sbx, name, getattr(now, name))
        if sbx.state is not SandboxState.RUNNING:
            sbx.route = None
        elif was is not SandboxState.RUNNING or sbx.route is None:
            await self._route(sbx)  # resumed elsewhere: its address may be new
        self._registry.update(sbx)
        self._lifecycle.arm(sbx)
        self._followed(sbx)

    def _followed(self, sbx: LiveSandbox) -> None:
        for hook in self._lifecycle.on_followed:
            try:
                hook(sbx)
            except Exception:
                log.exception("following sandbox %s's change failed", sbx.sandbox_id)

    def _route_later(self, sbx: LiveSandbox) -> None:
        """A running sandbox announced before its node made it (a create writes its row
        beside the node's work): asked again a few times, so that everything of this
        replica (Mission Control, the health checks) finds it, not only the gateway."""
        if sbx.state is not SandboxState.RUNNING or sbx.route is not None \
                or sbx.sandbox_id in self._routing:
            return
        self._routing.add(sbx.sandbox_id)

        async def again() -> None:
            try:
                for pause in (0.2, 0.5, 1.0, 2.0, 5.0):
                    await asyncio.sleep(pause)
                    if await self.route_now(sbx.sandbox_id) is not None \
                            or self._registry.get(sbx.sandbox_id) is not sbx:
                        return
            finally:
                self._routing.discard(sbx.sandbox_id)

        task = asyncio.create_task(again())
        self._retries.add(task)
        task.add_done_callback(self._retries.discard)

    async def catch_up(self, sandbox_id: str) -> None:
        """A request names a sandbox this replica has not heard of: made through another
        replica, whose client came here before the announcement did (the create's answer
        goes out when its row is committed; the announcement then takes a few ms). Its
        row is read and applied now; an unknown id costs that read and stays unknown."""
        if self._registry.get(sandbox_id) is None:
            await self.apply(sandbox_id)

    async def catch_up_running(self) -> None:
        """Every sandbox running in the store that this replica does not hold as running
        and routed (made or resumed through another an instant ago, or announced here
        before its node had made it), applied and routed now, but for those on lost
        nodes; one pass at a time, a caller arriving during one waiting for it."""
        async with self._catching_up:
            rows = await self._store.sandboxes_in_states([SandboxState.RUNNING.value])
            for rec in rows:
                sbx = self._registry.get(rec.sandbox_id)
                if sbx is None or sbx.state is not SandboxState.RUNNING \
                        or (sbx.route is None and sbx.health is not Health.LOST):
                    await self.route_now(rec.sandbox_id)

    async def recheck(self, sandbox_id: str) -> None:
        """The sandbox's machine said it does not run there while this replica holds it
        running: another replica's step (a pause, a move) may be under way or just done,
        its announcement not yet here. Waits for any step on it to end, wherever it
        runs, and applies its row (taking the sandbox's lease applies it). One this
        replica does not hold is read by ``route_now``, which the caller asks next."""
        sbx = self._registry.get(sandbox_id)
        if sbx is not None:
            async with sbx.lock:
                pass

    async def route_now(self, sandbox_id: str) -> Route | None:
        """The route to a running sandbox this replica has none for yet (made or resumed
        through another replica and not yet announced here, announced before its node
        answered, or its node was away): its row read again if this replica's view is
        not running, then its route asked of the backend, for a request that needs it."""
        sbx = self._registry.get(sandbox_id)
        if sbx is None or sbx.state is not SandboxState.RUNNING:
            await self.apply(sandbox_id)
            sbx = self._registry.get(sandbox_id)
        if sbx is None or sbx.state is not SandboxState.RUNNING or sbx.route is not None:
            return self._registry.route(sandbox_id)
        async with sbx.lock.here:
            if sbx.state is SandboxState.RUNNING and sbx.route is None:
                await self._route(sbx)
                self._registry.update(sbx)
        return self._registry.route(sandbox_id)

    async def _route(self, sbx: LiveSandbox) -> None:
        failed = await ask_route(self._backend, sbx)
        if failed is not None:
            log.info("no route to %s yet: %s", sbx.sandbox_id, failed)

    # -- this replica's traffic --------------------------------------------------------

    async def _announce_forever(self) -> None:
        while True:
            await asyncio.sleep(ACTIVITY_EVERY_S)
            active = self._registry.take_active()
            if active:
                try:
                    await self._coordination.announce_activity(sorted(active))
                except Exception as exc:
                    log.warning("telling the other replicas of traffic failed: %s", exc)

    # -- the leader's sweep --------------------------------------------------------------

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self._sweep_s)
            with contextlib.suppress(Exception):
                await self.sweep()

    async def sweep(self) -> list[str]:
        """Destroy what the backend holds that no live row has claimed for two sweeps in a
        row; returns what it destroyed."""
        held = set(await self._backend.list())
        rows = await self._store.sandboxes_in_states([s.value for s in LIVE_STATES])
        orphans = held - {r.sandbox_id for r in rows}
        destroyed = sorted(orphans & self._suspects)
        self._suspects = orphans - self._suspects
        for sandbox_id in destroyed:
            log.warning("destroying sandbox %s: no live record claims it", sandbox_id)
            try:
                await self._backend.destroy(sandbox_id)
            except BackendError:
                log.exception("destroying orphan %s failed", sandbox_id)
        return destroyed
