"""Is each running sandbox's envd answering? The control plane asks, and says when not.

Every ``interval_s`` the watch sends ``GET /health`` to the envd of each running sandbox
(straight to its address, not through the gateway: it is no traffic to the idle policy),
all at once, each bounded by ``timeout_s``. A sandbox whose envd has not answered for
``unhealthy_after_s`` (every check since the first failed one failed) becomes
:attr:`Health.UNHEALTHY`: an ``unhealthy`` event (level error) in its log and trace, a
``bac.sandbox.unhealthy`` webhook, and ``health: unhealthy`` in the API's list and
detail. The first check it answers again makes it healthy, with a ``healthy`` event.

Why a bound, not the first failure: envd's keeper restarts a dead envd within a fraction
of a second (``bac_envd._keeper``), and a busy sandbox may miss one check; what the
watch reports is an envd that *stays* away, the case in which every call to the sandbox
fails. A sandbox in a lifecycle step (its lock held: a pause, a resume, a checkpoint) is
not checked and its streak starts again, since a frozen envd does not answer either.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from bac_server.backends.dialing import DIRECT, Dialer, open_dialed
from bac_server.store import SandboxStore

from ._events import EventKind, event
from ._registry import LiveSandbox, Registry
from ._states import Health, SandboxState

log = logging.getLogger(__name__)

# (sandbox id, its address, envd's port, the bound in seconds) -> it answered
Probe = Callable[[str, str, int, float], Awaitable[bool]]


@dataclass(frozen=True)
class HealthSettings:
    interval_s: float = 5.0  # 0: no checks
    timeout_s: float = 3.0
    unhealthy_after_s: float = 30.0


def envd_prober(dialer: Dialer = DIRECT) -> Probe:
    """The probe: true when the sandbox's envd answers ``GET /health`` with 204 in time
    (reached through ``dialer``: its node's tunnel, when several machines run them)."""

    async def probe(sandbox_id: str, address: str, port: int, timeout_s: float) -> bool:
        writer: asyncio.StreamWriter | None = None
        try:
            async with asyncio.timeout(timeout_s):
                reader, writer = await open_dialed(dialer, sandbox_id, address, port)
                writer.write(b"GET /health HTTP/1.1\r\nHost: envd\r\n"
                             b"Connection: close\r\n\r\n")
                await writer.drain()
                status = await reader.readline()
        except (OSError, TimeoutError):
            return False
        finally:
            if writer is not None:
                writer.close()
        return status.split(b" ", 2)[1:2] == [b"204"]

    return probe


class HealthWatch:
    def __init__(self, *, registry: Registry, sandbox_store: SandboxStore,
                 settings: HealthSettings, probe: Probe | None = None,
                 on_change: Callable[[], None] = lambda: None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        """``on_change``: called after a change of health is written (wakes followers)."""
        self._registry = registry
        self._store = sandbox_store
        self.settings = settings
        self._probe = probe if probe is not None else envd_prober()
        self._on_change = on_change
        self._monotonic = monotonic
        self._failing: dict[str, float] = {}  # sandbox id -> first failed check, monotonic
        # Whether this process writes changes of health (several replicas: the leader).
        self.records: Callable[[], bool] = lambda: True

    async def check_once(self) -> None:
        """Check every running sandbox once and write what changed."""
        due = [s for s in self._registry.all() if s.state is SandboxState.RUNNING
               and s.route is not None and not s.lock.locked()
               and s.health is not Health.LOST]
        answers = await asyncio.gather(*(
            self._probe(s.sandbox_id, s.route.address, s.route.envd_port,
                        self.settings.timeout_s)
            for s in due if s.route is not None))
        now = self._monotonic()
        checked = {s.sandbox_id for s in due}
        for sandbox_id in set(self._failing) - checked:
            del self._failing[sandbox_id]  # gone, paused, or mid-step: a new streak later
        for sbx, answered in zip(due, answers, strict=True):
            if answered:
                self._failing.pop(sbx.sandbox_id, None)
                if sbx.health is Health.UNHEALTHY:
                    await self._change(sbx, Health.HEALTHY, 0.0)
                continue
            since = self._failing.setdefault(sbx.sandbox_id, now)
            if sbx.health is Health.HEALTHY and now - since >= self.settings.unhealthy_after_s:
                await self._change(sbx, Health.UNHEALTHY, now - since)

    async def nodes_changed(self, sandbox_ids: Sequence[str], reachable: bool, *,
                            moved: bool = False, mover: bool = False) -> None:
        """Their node was marked lost (``reachable`` False) or beats again, or (``moved``)
        they were resumed on another node: each sandbox of them this plane holds is lost,
        or healthy again (its checks start afresh). A move's event is written by the
        replica that moved it (``mover``), leader or not: the others may never have seen
        it lost, and write nothing of it."""
        for sandbox_id in sandbox_ids:
            sbx = self._registry.get(sandbox_id)
            if sbx is None:
                continue
            self._failing.pop(sandbox_id, None)
            if not reachable and sbx.health is not Health.LOST:
                await self._change(sbx, Health.LOST, 0.0)
            elif reachable and sbx.health is Health.LOST:
                if moved and not mover:
                    sbx.health = Health.HEALTHY
                    self._on_change()
                    continue
                await self._change(sbx, Health.HEALTHY, 0.0, moved=moved)

    async def _change(self, sbx: LiveSandbox, health: Health, silent_s: float, *,
                      moved: bool = False) -> None:
        before, sbx.health = sbx.health, health
        if health is Health.LOST:
            record = event(
                sbx.sandbox_id, sbx.team_id, EventKind.UNHEALTHY,
                "its node stopped answering: the sandbox may still run there, but nothing "
                "reaches it until the node is back", level="error", reason="node_lost")
        elif before is Health.LOST and moved:
            record = event(sbx.sandbox_id, sbx.team_id, EventKind.HEALTHY,
                           "resumed on another node (its own is lost)", reason="node_moved")
        elif before is Health.LOST:
            record = event(sbx.sandbox_id, sbx.team_id, EventKind.HEALTHY,
                           "its node answers again", reason="node_back")
        elif health is Health.UNHEALTHY:
            record = event(
                sbx.sandbox_id, sbx.team_id, EventKind.UNHEALTHY,
                f"envd has not answered for {silent_s:.0f} s: calls to the sandbox fail",
                level="error", silent_s=f"{silent_s:.1f}")
        else:
            record = event(sbx.sandbox_id, sbx.team_id, EventKind.HEALTHY,
                           "envd answers again")
        if not self.records() and not moved:
            # Another replica leads and writes the change (each sees the node for itself).
            self._on_change()
            return
        try:
            await self._store.add_event(record)
        except Exception:
            log.exception("writing the health of %s failed", sbx.sandbox_id)
            return
        self._on_change()

    async def run(self) -> None:
        """Check forever (cancel to stop); one failed round never stops the loop."""
        while True:
            await asyncio.sleep(self.settings.interval_s)
            try:
                await self.check_once()
            except Exception:
                log.exception("checking the sandboxes' health failed")
