"""The in-memory view of every live sandbox: what the API answers from and the gateway routes by.

The store is the durable copy; this registry is the fast one (the gateway looks a sandbox up
on every request, so that lookup is a dict read). It is rebuilt from the store and the backend
at start-up by :mod:`._reconcile`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bac_server.backends.base import PauseKind
from bac_server.store import SandboxRecord

from ..clock import Clock, Scheduled, SystemClock
from ..errors import SandboxNotFoundError
from ..keys import Team
from ._states import LIVE_STATES, VISIBLE_STATES, Health, SandboxState
from ._steps import SandboxLock, StepLeases


class OnTimeout(enum.Enum):
    """What a sandbox's timeout (or its idle policy) does: end it, or pause it (E2B
    ``autoPause``)."""

    KILL = "kill"
    PAUSE = "pause"


# The end of a sandbox that has none (created with ``timeout: 0``): the wire's ``endAt``
# must be a date, so it is the last one there is; no timer is armed for it.
NO_END = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


@dataclass(frozen=True)
class Route:
    """Where the gateway sends traffic for one running sandbox."""

    sandbox_id: str
    address: str
    envd_port: int
    traffic_access_token: str | None
    # Lets the gateway tell which sandbox signed a file URL that carries no routing header.
    envd_access_token: str = ""


@dataclass(eq=False)
class LiveSandbox:
    sandbox_id: str
    team_id: str
    template_id: str
    alias: str | None
    cpu_count: int
    memory_mb: int
    disk_mb: int
    envd_access_token: str
    traffic_access_token: str | None
    metadata: dict[str, str]
    env_vars: dict[str, str]
    network: dict[str, Any] | None
    allow_internet_access: bool | None
    started_at: datetime
    end_at: datetime
    state: SandboxState
    # Pause instead of kill at the timeout (E2B ``autoPause``), with or without memory.
    on_timeout: OnTimeout = OnTimeout.KILL
    pause_memory: bool = True
    # Traffic to a paused sandbox (gateway or SDK) resumes it (E2B ``autoResume``).
    auto_resume: bool = False
    # How it is paused now; None while running.
    paused_as: PauseKind | None = None
    # Bytes of memory state its pause wrote to disk (0 while running, frozen or paused
    # with its files only): the saved state the meter charges as storage.
    saved_bytes: int = 0
    # What holds it paused, so that nothing resumes it (the operator's kill switch:
    # "kill_switch") until the operator releases it; None: nothing.
    held: str | None = None
    # The timeout it was created with: what an automatic resume grants again (0: no end).
    timeout_s: int = 300
    # Idle policy: after ``idle_after_s`` seconds (0: never) with no API or gateway
    # traffic and its CPU under ``idle_cpu_pct`` %, ``idle_action`` (pause by default).
    idle_after_s: int = 0
    idle_cpu_pct: float = 5.0
    idle_action: OnTimeout = OnTimeout.PAUSE
    # Scheduled checkpoints: every ``checkpoint_every_s`` seconds, keeping the last few.
    checkpoint_every_s: int | None = None
    checkpoint_keep: int | None = None
    route: Route | None = None
    # The name of the API key that created it (None when not known).
    key_name: str | None = None
    # Whether its envd answers (not stored: the health watch finds it again after a
    # restart within its bound, ``_health``).
    health: Health = Health.HEALTHY
    # Serialises lifecycle steps on this sandbox (kill vs timeout vs connect), across API
    # replicas too when the registry has step leases (``_steps``).
    lock: SandboxLock = field(default_factory=SandboxLock)
    timer: Scheduled | None = None
    idle_timer: Scheduled | None = None
    # Activity (not stored): the last API call on it or gateway request to it, and the
    # gateway requests to it in flight (a command's stream, a download, a WebSocket).
    last_active: datetime = field(default_factory=lambda: datetime.now(UTC))
    in_flight: int = 0

    @property
    def has_end(self) -> bool:
        return self.end_at < NO_END

    def attach(self, address: str, envd_port: int) -> None:
        """Point the gateway at the sandbox's current address (after create or resume)."""
        self.route = Route(
            self.sandbox_id, address, envd_port, self.traffic_access_token,
            self.envd_access_token,
        )

    @classmethod
    def from_record(cls, rec: SandboxRecord) -> LiveSandbox:
        return cls(
            sandbox_id=rec.sandbox_id,
            team_id=rec.team_id,
            template_id=rec.template_id,
            alias=rec.alias,
            cpu_count=rec.cpu_count,
            memory_mb=rec.memory_mb,
            disk_mb=rec.disk_mb,
            envd_access_token=rec.envd_access_token,
            traffic_access_token=rec.traffic_access_token,
            metadata=dict(rec.metadata),
            env_vars=dict(rec.env_vars),
            network=rec.network,
            allow_internet_access=rec.allow_internet_access,
            started_at=rec.started_at,
            end_at=rec.end_at,
            state=SandboxState(rec.state),
            key_name=rec.key_name,
            **_lifecycle_fields(rec.lifecycle or {}),
        )

    def lifecycle(self) -> dict[str, Any]:
        """The lifecycle settings as the store keeps them (an enum by its value)."""
        saved = {}
        for name in _LIFECYCLE_FIELDS:
            value = getattr(self, name)
            saved[name] = value.value if isinstance(value, enum.Enum) else value
        return saved

    def to_record(self) -> SandboxRecord:
        return SandboxRecord(
            sandbox_id=self.sandbox_id,
            team_id=self.team_id,
            template_id=self.template_id,
            alias=self.alias,
            state=self.state.value,
            started_at=self.started_at,
            end_at=self.end_at,
            cpu_count=self.cpu_count,
            memory_mb=self.memory_mb,
            disk_mb=self.disk_mb,
            envd_access_token=self.envd_access_token,
            traffic_access_token=self.traffic_access_token,
            metadata=dict(self.metadata),
            env_vars=dict(self.env_vars),
            network=self.network,
            allow_internet_access=self.allow_internet_access,
            lifecycle=self.lifecycle(),
            key_name=self.key_name,
        )


_LIFECYCLE_FIELDS = ("on_timeout", "pause_memory", "auto_resume", "paused_as", "timeout_s",
                     "checkpoint_every_s", "checkpoint_keep", "idle_after_s", "idle_cpu_pct",
                     "idle_action", "held", "saved_bytes")


_LIFECYCLE_ENUMS: dict[str, type[enum.Enum]] = {"on_timeout": OnTimeout, "paused_as": PauseKind,
                                                "idle_action": OnTimeout}


def _lifecycle_fields(saved: dict[str, Any]) -> dict[str, Any]:
    found = {}
    for name in _LIFECYCLE_FIELDS:
        if name in saved:
            value, kind = saved[name], _LIFECYCLE_ENUMS.get(name)
            found[name] = value if kind is None or value is None else kind(value)
    return found


class Registry:
    """Live sandboxes by id. Not thread-safe: used from the event loop only.

    It also keeps each sandbox's activity, which its idle policy reads: a team's lookup of
    its sandbox (every API call on one) and the gateway's requests to it (``traffic``).
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._sandboxes: dict[str, LiveSandbox] = {}
        self._routes: dict[str, Route] = {}
        self._gone_listeners: list[Callable[[str], None]] = []
        self._change_listeners: list[Callable[[LiveSandbox], None]] = []
        # Sandboxes with API calls or gateway traffic here since the last ``take_active``
        # (what this replica tells the others, ``_replicas``); None: nobody takes them
        # (one process), so none are kept.
        self._active_here: set[str] | None = None
        # Leases on the sandboxes' steps across API replicas; None: one process.
        self.steps: StepLeases | None = None

    def add(self, sbx: LiveSandbox) -> None:
        if self.steps is not None:
            sbx.lock.across = self.steps.across(sbx.sandbox_id)
        sbx.last_active = self._clock.now()
        self._sandboxes[sbx.sandbox_id] = sbx
        self._sync_route(sbx)
        self._changed(sbx)

    def remove(self, sandbox_id: str) -> None:
        sbx = self._sandboxes.pop(sandbox_id, None)
        if sbx is not None:
            self._changed(sbx)
        if self._routes.pop(sandbox_id, None) is not None:
            for listener in self._gone_listeners:
                listener(sandbox_id)

    def update(self, sbx: LiveSandbox) -> None:
        """Call after changing ``state`` or ``route``: the gateway sees the change at once."""
        if sbx.state not in LIVE_STATES:
            self.remove(sbx.sandbox_id)
            return
        had_route = sbx.sandbox_id in self._routes
        self._sync_route(sbx)
        self._changed(sbx)
        if had_route and sbx.sandbox_id not in self._routes:
            for listener in self._gone_listeners:
                listener(sbx.sandbox_id)

    def _sync_route(self, sbx: LiveSandbox) -> None:
        if sbx.state is SandboxState.RUNNING and sbx.route is not None:
            self._routes[sbx.sandbox_id] = sbx.route
        else:
            self._routes.pop(sbx.sandbox_id, None)

    def on_change(self, listener: Callable[[LiveSandbox], None]) -> None:
        """Call ``listener(sbx)`` when a sandbox is added, changes state or is removed."""
        self._change_listeners.append(listener)

    def _changed(self, sbx: LiveSandbox) -> None:
        for listener in self._change_listeners:
            listener(sbx)

    def on_gone(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(sandbox_id)`` when a sandbox stops being routable."""
        self._gone_listeners.append(listener)

    def route(self, sandbox_id: str) -> Route | None:
        return self._routes.get(sandbox_id)

    def routes(self) -> list[Route]:
        return list(self._routes.values())

    def get(self, sandbox_id: str) -> LiveSandbox | None:
        return self._sandboxes.get(sandbox_id)

    def owned(self, team: Team, sandbox_id: str, *, activity: bool = True) -> LiveSandbox:
        """The team's visible sandbox; another team's looks exactly like a missing one.
        A lookup is the sandbox's API activity unless ``activity`` is False (a step the
        server takes on its own, such as a scheduled checkpoint)."""
        sbx = self._sandboxes.get(sandbox_id)
        if sbx is None or sbx.team_id != team.team_id or sbx.state not in VISIBLE_STATES:
            raise SandboxNotFoundError(sandbox_id)
        if activity:
            sbx.last_active = self._clock.now()
            if self._active_here is not None:
                self._active_here.add(sandbox_id)
        return sbx

    def traffic_started(self, sandbox_id: str) -> None:
        """The gateway began a request to the sandbox (it is active until it ends)."""
        sbx = self._sandboxes.get(sandbox_id)
        if sbx is not None:
            sbx.in_flight += 1
            sbx.last_active = self._clock.now()
            if self._active_here is not None:
                self._active_here.add(sandbox_id)

    def traffic_ended(self, sandbox_id: str) -> None:
        sbx = self._sandboxes.get(sandbox_id)
        if sbx is not None:
            sbx.in_flight = max(0, sbx.in_flight - 1)
            sbx.last_active = self._clock.now()

    def take_active(self) -> set[str]:
        """The sandboxes active through this process since the last call, and those with
        a request to them in flight here; from the first call on, activity is kept for
        the next."""
        taken = (self._active_here or set()) | {s.sandbox_id for s in self._sandboxes.values()
                                                if s.in_flight > 0}
        self._active_here = set()
        return taken

    def touch(self, sandbox_id: str) -> None:
        """Activity another replica served (it counts for the idle policy)."""
        sbx = self._sandboxes.get(sandbox_id)
        if sbx is not None:
            sbx.last_active = self._clock.now()

    def visible(self, team: Team) -> list[LiveSandbox]:
        return [
            s
            for s in self._sandboxes.values()
            if s.team_id == team.team_id and s.state in VISIBLE_STATES
        ]

    def live_count(self, team_id: str) -> int:
        """Sandboxes holding host resources: running ones, and paused ones still in memory
        (a sandbox paused to disk holds none and may stay paused for ever)."""
        return sum(1 for s in self._sandboxes.values()
                   if s.team_id == team_id and s.paused_as in (None, PauseKind.FREEZER))

    def all(self) -> list[LiveSandbox]:
        return list(self._sandboxes.values())
