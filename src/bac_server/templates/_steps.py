"""What a template build is made of: where it starts, its steps, how it starts and is ready.

The same model comes from the E2B template API (``steps`` of ``TemplateBuildStartV2``),
from Bac's Python template builder and from a Dockerfile (both parsed client-side into
those steps). Only ``RunStep`` and ``CopyStep`` make a layer; ``EnvStep``, ``WorkdirStep``
and ``UserStep`` change the state later steps run in (and the template's defaults), so
they are part of every later step's cache key.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RunStep:
    """A shell command (``/bin/sh -c``), as ``user`` or the current USER."""

    command: str
    user: str | None = None
    force: bool = False  # rebuild this step (and so every later one) even if cached


@dataclass(frozen=True)
class CopyStep:
    """Files from the build's upload ``files_hash`` (a tar of the context) to ``dest``.

    ``src`` is a path or glob relative to the context, as the client wrote it."""

    src: str
    dest: str
    files_hash: str
    user: str | None = None  # owner of the copied files (default: root)
    mode: int | None = None  # permission bits for the copied files
    force: bool = False


@dataclass(frozen=True)
class EnvStep:
    values: tuple[tuple[str, str], ...]
    force: bool = False


@dataclass(frozen=True)
class WorkdirStep:
    path: str
    force: bool = False


@dataclass(frozen=True)
class UserStep:
    user: str
    force: bool = False


Step = RunStep | CopyStep | EnvStep | WorkdirStep | UserStep


@dataclass(frozen=True)
class FromTemplate:
    """A template already built by this server: ``base``, ``code-interpreter``, or a
    team's ``name[:tag]``."""

    ref: str


@dataclass(frozen=True)
class FromImage:
    """An image: ``debian:<suite>`` (built from Debian's archive), ``oci:<dir>[:tag]``,
    ``oci-archive:<file>``, ``docker-archive:<file>``, or ``[registry/]repo[:tag|@digest]``."""

    ref: str
    username: str | None = None
    password: str | None = None


@dataclass(frozen=True)
class BuildRecipe:
    source: FromTemplate | FromImage
    steps: tuple[Step, ...] = ()
    start_cmd: str | None = None  # run (and kept running) in every sandbox of the template
    ready_cmd: str | None = None  # exits 0 once the start command's service is ready
    force: bool = False  # ignore the layer cache for every step


class LogLevel(enum.Enum):
    DEBUG = "debug"
    INFO = "info"
    WARN = "warn"
    ERROR = "error"


@dataclass(frozen=True)
class LogEntry:
    """One line of a build's log. ``step`` is ``"base"``, the 1-based step number as a
    string, or ``"finalize"`` (the names E2B's SDK maps back to its stack traces)."""

    timestamp: float  # unix seconds
    level: LogLevel
    message: str
    step: str | None = None


@dataclass(frozen=True)
class TemplateConfig:
    """What a built template's sandboxes start with."""

    user: str = "user"
    workdir: str = "/home/user"
    env: tuple[tuple[str, str], ...] = field(default=())
    start_cmd: str | None = None
    ready_cmd: str | None = None
