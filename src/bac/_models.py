"""Plain data the SDK hands back: sandboxes, processes, files and their events.

Field names follow E2B's SDK so code moves between the two with few edits.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bac._errors import ServerError


class SandboxState(enum.Enum):
    """Where a sandbox is in its life, as the server reports it."""

    RUNNING = "running"
    PAUSED = "paused"


class SandboxHealth(enum.Enum):
    """Whether a running sandbox's envd answers the server's health checks (Bac's own;
    ``unhealthy`` leaves its state ``running``)."""

    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"


def parse_time(value: Any, key: str) -> datetime:
    """An RFC 3339 timestamp from the API; a missing timezone is a server bug."""
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError as exc:
        raise ServerError(f"server sent an invalid {key!r} timestamp: {value!r}") from exc
    if parsed.tzinfo is None:
        raise ServerError(f"server sent {key!r} without a timezone: {value!r}")
    return parsed


@dataclass(frozen=True)
class SandboxInfo:
    """What the server knows about one sandbox."""

    sandbox_id: str
    template_id: str
    name: str | None
    metadata: dict[str, str]
    started_at: datetime
    end_at: datetime
    state: SandboxState
    cpu_count: int
    memory_mb: int
    disk_size_mb: int
    envd_version: str
    sandbox_domain: str | None = None
    health: SandboxHealth = SandboxHealth.HEALTHY

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> SandboxInfo:
        """Parse a ``SandboxDetail`` or ``ListedSandbox`` body."""
        try:
            return cls(
                sandbox_id=str(data["sandboxID"]),
                template_id=str(data["templateID"]),
                name=data.get("alias"),
                metadata=dict(data.get("metadata") or {}),
                started_at=parse_time(data["startedAt"], "startedAt"),
                end_at=parse_time(data["endAt"], "endAt"),
                state=SandboxState(data["state"]),
                cpu_count=int(data["cpuCount"]),
                memory_mb=int(data["memoryMB"]),
                disk_size_mb=int(data.get("diskSizeMB") or 0),
                envd_version=str(data["envdVersion"]),
                sandbox_domain=data.get("domain"),
                # An E2B server (or an older Bac) sends none: healthy as far as it says.
                health=SandboxHealth(data.get("health") or "healthy"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ServerError(f"server sent an incomplete sandbox description: {exc}") from exc

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the CLI's ``--json`` output)."""
        return {
            "sandboxId": self.sandbox_id,
            "templateId": self.template_id,
            "alias": self.name,
            "metadata": self.metadata,
            "startedAt": self.started_at.isoformat(),
            "endAt": self.end_at.isoformat(),
            "state": self.state.value,
            "health": self.health.value,
            "cpuCount": self.cpu_count,
            "memoryMB": self.memory_mb,
            "diskSizeMB": self.disk_size_mb,
            "envdVersion": self.envd_version,
        }


@dataclass(frozen=True)
class SandboxQuery:
    """Filters for :meth:`AsyncSandbox.list`; every given filter must match."""

    metadata: dict[str, str] | None = None
    state: list[SandboxState] | None = None
    template: str | None = None
    started_after: datetime | None = None


@dataclass(frozen=True)
class ProcessInfo:
    """A command or PTY running in the sandbox."""

    pid: int
    tag: str | None
    cmd: str
    args: list[str]
    envs: dict[str, str]
    cwd: str | None


@dataclass(frozen=True)
class CommandResult:
    """How a command ended and everything it printed."""

    stdout: str
    stderr: str
    exit_code: int
    error: str | None = None


@dataclass(frozen=True)
class PtySize:
    """Terminal size in character cells."""

    rows: int
    cols: int


class FileType(enum.Enum):
    """Kind of filesystem entry."""

    FILE = "file"
    DIR = "dir"
    SYMLINK = "symlink"


@dataclass(frozen=True)
class WriteInfo:
    """A file the sandbox accepted from an upload."""

    name: str
    type: FileType | None
    path: str
    metadata: dict[str, str] | None = None


@dataclass(frozen=True)
class EntryInfo:
    """One filesystem entry, as ``stat`` sees it inside the sandbox."""

    name: str
    type: FileType | None
    path: str
    size: int
    mode: int
    permissions: str
    owner: str
    group: str
    modified_time: datetime | None
    symlink_target: str | None = None
    metadata: dict[str, str] | None = field(default=None)


class FilesystemEventType(enum.Enum):
    """What happened to a watched path."""

    CREATE = "create"
    WRITE = "write"
    REMOVE = "remove"
    RENAME = "rename"
    CHMOD = "chmod"


@dataclass(frozen=True)
class FilesystemEvent:
    """One change under a watched directory; ``name`` is relative to it."""

    name: str
    type: FilesystemEventType
    entry: EntryInfo | None = None
