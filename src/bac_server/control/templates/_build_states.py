"""The lifecycle of a template build: states and the transitions allowed between them.

::

    waiting ──▶ building ──▶ ready
       │           │
       └───────────┴──────▶ error     (a failed step, a cancel, a restart)

``waiting`` covers both "created, steps not sent yet" (after ``POST /v3/templates``) and
"queued behind other builds". Only a ``ready`` build can hold a tag.
"""

from __future__ import annotations

import enum


class BuildStatus(enum.Enum):
    WAITING = "waiting"
    BUILDING = "building"
    READY = "ready"
    ERROR = "error"


_TRANSITIONS: dict[BuildStatus, frozenset[BuildStatus]] = {
    BuildStatus.WAITING: frozenset({BuildStatus.BUILDING, BuildStatus.ERROR}),
    BuildStatus.BUILDING: frozenset({BuildStatus.READY, BuildStatus.ERROR}),
    BuildStatus.READY: frozenset(),
    BuildStatus.ERROR: frozenset(),
}

UNFINISHED = frozenset({BuildStatus.WAITING, BuildStatus.BUILDING})


def sources_of(target: BuildStatus) -> list[str]:
    """The states a build may reach ``target`` from, as stored (for compare-and-set)."""
    return sorted(s.value for s, nexts in _TRANSITIONS.items() if target in nexts)


def is_finished(status: str) -> bool:
    return BuildStatus(status) not in UNFINISHED
