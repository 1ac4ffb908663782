"""What the template API answers: templates, their builds, build logs, tags."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bac._errors import ServerError
from bac._models import parse_time


class BuildStatus(enum.Enum):
    WAITING = "waiting"
    BUILDING = "building"
    READY = "ready"
    ERROR = "error"

    @property
    def finished(self) -> bool:
        return self in (BuildStatus.READY, BuildStatus.ERROR)


def _status(value: Any) -> BuildStatus:
    try:
        return BuildStatus(value)
    except ValueError as exc:
        raise ServerError(f"server sent an unknown build status {value!r}") from exc


def _time_or_none(value: Any, key: str) -> datetime | None:
    return None if value is None else parse_time(value, key)


@dataclass(frozen=True)
class BuildLogEntry:
    """One line of a build's log; ``step`` is ``"base"``, ``"1"``... or ``"finalize"``."""

    timestamp: datetime
    level: str  # debug | info | warn | error
    message: str
    step: str | None = None

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> BuildLogEntry:
        try:
            step = data.get("step")
            return cls(parse_time(data["timestamp"], "timestamp"), str(data["level"]),
                       str(data["message"]), None if step is None else str(step))
        except (KeyError, TypeError) as exc:
            raise ServerError(f"server sent an incomplete build log entry: {exc}") from exc

    def to_json(self) -> dict[str, Any]:
        return {"timestamp": self.timestamp.isoformat(), "level": self.level,
                "message": self.message, "step": self.step}


@dataclass(frozen=True)
class BuildState:
    """A build's status and the log lines from the requested offset on."""

    template_id: str
    build_id: str
    status: BuildStatus
    logs: list[BuildLogEntry]
    reason: str | None = None  # why it failed
    reason_step: str | None = None
    reason_logs: list[BuildLogEntry] = field(default_factory=list)

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> BuildState:
        try:
            reason = data.get("reason") or {}
            return cls(
                str(data["templateID"]), str(data["buildID"]), _status(data["status"]),
                [BuildLogEntry.from_api(item) for item in data.get("logEntries") or []],
                reason.get("message"),
                None if reason.get("step") is None else str(reason["step"]),
                [BuildLogEntry.from_api(item) for item in reason.get("logEntries") or []],
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ServerError(f"server sent an incomplete build status: {exc}") from exc


@dataclass(frozen=True)
class BuildInfo:
    """A finished build: what to pass to ``Sandbox.create`` is ``name`` (or ``name:tag``)."""

    template_id: str
    build_id: str
    name: str
    tags: list[str]
    duration_s: float
    steps: int  # build steps sent (COPY, RUN, ENV...)
    cached_steps: int  # of those, how many the server reported as served from its cache

    def to_json(self) -> dict[str, Any]:
        return {"templateId": self.template_id, "buildId": self.build_id, "name": self.name,
                "tags": self.tags, "durationS": round(self.duration_s, 3),
                "steps": self.steps, "cachedSteps": self.cached_steps}


def _reason(data: dict[str, Any]) -> str | None:
    """The message of a ``BuildStatusReason`` (why a build failed), if there is one."""
    reason = data.get("reason")
    message = reason.get("message") if isinstance(reason, dict) else None
    return None if message is None else str(message)


@dataclass(frozen=True)
class TemplateBuild:
    build_id: str
    status: BuildStatus
    created_at: datetime | None
    finished_at: datetime | None
    reason: str | None = None  # why it failed

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> TemplateBuild:
        return cls(str(data["buildID"]), _status(data["status"]),
                   _time_or_none(data.get("createdAt"), "createdAt"),
                   _time_or_none(data.get("finishedAt"), "finishedAt"), _reason(data))


@dataclass(frozen=True)
class TemplateInfo:
    """A template of this team (or a public one), with its latest build's resources;
    ``reason``: why its newest build failed (``build_status`` error), from a Bac server."""

    template_id: str
    build_id: str | None
    names: list[str]
    public: bool
    cpu_count: int | None
    memory_mb: int | None
    disk_size_mb: int | None
    build_status: BuildStatus | None
    build_count: int | None
    created_at: datetime | None
    updated_at: datetime | None
    builds: list[TemplateBuild] = field(default_factory=list)
    reason: str | None = None

    @property
    def name(self) -> str:
        return self.names[0] if self.names else self.template_id

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> TemplateInfo:
        try:
            names = data.get("names") or data.get("aliases") or []
            status = data.get("buildStatus")
            return cls(
                str(data["templateID"]), data.get("buildID"), [str(n) for n in names],
                bool(data.get("public", False)), data.get("cpuCount"), data.get("memoryMB"),
                data.get("diskSizeMB"), None if status is None else _status(status),
                data.get("buildCount"), _time_or_none(data.get("createdAt"), "createdAt"),
                _time_or_none(data.get("updatedAt"), "updatedAt"),
                [TemplateBuild.from_api(b) for b in data.get("builds") or []],
                _reason(data),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ServerError(f"server sent an incomplete template: {exc}") from exc

    def to_json(self) -> dict[str, Any]:
        def when(value: datetime | None) -> str | None:
            return value.isoformat() if value else None

        return {
            "templateId": self.template_id, "buildId": self.build_id, "names": self.names,
            "public": self.public, "cpuCount": self.cpu_count, "memoryMB": self.memory_mb,
            "diskSizeMB": self.disk_size_mb,
            "buildStatus": self.build_status.value if self.build_status else None,
            "buildCount": self.build_count, "createdAt": when(self.created_at),
            "updatedAt": when(self.updated_at), "reason": self.reason,
            "builds": [{"buildId": b.build_id, "status": b.status.value,
                        "createdAt": when(b.created_at), "finishedAt": when(b.finished_at),
                        "reason": b.reason}
                       for b in self.builds],
        }


@dataclass(frozen=True)
class TemplateTag:
    tag: str
    build_id: str
    created_at: datetime | None

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> TemplateTag:
        try:
            return cls(str(data["tag"]), str(data["buildID"]),
                       _time_or_none(data.get("createdAt"), "createdAt"))
        except (KeyError, TypeError) as exc:
            raise ServerError(f"server sent an incomplete tag: {exc}") from exc
