"""The sandbox lifecycle: states and the transitions allowed between them.

::

    creating ──▶ running ◀──▶ paused
       │            │            │
       ▼            ▼            ▼
     failed    killed | died   killed | died

``killed`` covers both an explicit kill and the end of the timeout; the event log says which.
``died`` means the backend found the sandbox's processes gone without being asked.

Whether a running sandbox's envd answers is its :class:`Health`, beside the state, not one
of the states: an unhealthy sandbox is still running (its processes run, it holds its
resources, its timeout counts, it can be paused, resumed or killed like any other), and
every transition above stays what it is; a state would have doubled each of them
(``unhealthy → paused``, ``unhealthy → killed``, ...) and broken the wire's two-value
``state`` (running, paused) that E2B's SDKs parse.
"""

from __future__ import annotations

import enum


class SandboxState(enum.Enum):
    CREATING = "creating"
    RUNNING = "running"
    PAUSED = "paused"
    KILLED = "killed"
    DIED = "died"
    FAILED = "failed"


_TRANSITIONS: dict[SandboxState, frozenset[SandboxState]] = {
    SandboxState.CREATING: frozenset({SandboxState.RUNNING, SandboxState.FAILED}),
    SandboxState.RUNNING: frozenset(
        {SandboxState.PAUSED, SandboxState.KILLED, SandboxState.DIED}
    ),
    SandboxState.PAUSED: frozenset(
        {SandboxState.RUNNING, SandboxState.KILLED, SandboxState.DIED}
    ),
    SandboxState.KILLED: frozenset(),
    SandboxState.DIED: frozenset(),
    SandboxState.FAILED: frozenset(),
}

# States whose sandbox still holds backend resources (and counts against team limits).
LIVE_STATES = frozenset({SandboxState.CREATING, SandboxState.RUNNING, SandboxState.PAUSED})
# States the API shows (the wire's SandboxState enum has only these two).
VISIBLE_STATES = frozenset({SandboxState.RUNNING, SandboxState.PAUSED})


class Health(enum.Enum):
    """Whether a running sandbox's envd answers the control plane (``_health``)."""

    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"  # it has not answered for ``unhealthy_after_s``
    # Its node stopped beating (several machines, docs/scale-out.md): the node may still
    # run it, nothing here can reach it; it is never placed elsewhere meanwhile.
    LOST = "lost"


class InvalidTransition(RuntimeError):
    """A lifecycle step was attempted from a state that does not allow it (a bug)."""


def can_transition(current: SandboxState, target: SandboxState) -> bool:
    return target in _TRANSITIONS[current]


def check_transition(current: SandboxState, target: SandboxState) -> None:
    if not can_transition(current, target):
        raise InvalidTransition(f"sandbox cannot go from {current.value} to {target.value}")
