"""Errors of template recipes and builds, a branch of the SDK's tree (:mod:`bac._errors`).

::

    SandboxError
    ├── InvalidArgumentError
    │   └── DockerfileError          a recipe the SDK cannot turn into build steps: the
    │                                Dockerfile's name and line, and what was expected; also
    │                                a COPY source that matches no file in the context
    └── TemplateBuildError           the server ran the build and it failed: the failing
                                     step, its message, and the last lines it logged

Both are raised before (``DockerfileError``) or after (``TemplateBuildError``) the server
accepted the build; a ``DockerfileError`` never leaves anything behind on the server.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bac._errors import InvalidArgumentError, SandboxError

if TYPE_CHECKING:
    from bac._template._models import BuildLogEntry


@dataclass(frozen=True)
class Origin:
    """Where a build step was written: a Dockerfile's name and 1-based line."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


class DockerfileError(InvalidArgumentError):
    """A recipe error, located: ``Dockerfile:7: COPY needs at least a source and a
    destination``."""

    def __init__(self, message: str, origin: Origin | None = None,
                 file: str | None = None) -> None:
        where = str(origin) if origin is not None else (file or "")
        super().__init__(f"{where}: {message}" if where else message)
        self.reason = message
        self.file = origin.file if origin is not None else file
        self.line = origin.line if origin is not None else None


@dataclass(frozen=True)
class DockerfileWarning:
    """Something the build accepts but ignores (``EXPOSE``, ``LABEL``...), located."""

    message: str
    origin: Origin | None = None

    def __str__(self) -> str:
        return f"{self.origin}: {self.message}" if self.origin else self.message


class TemplateBuildError(SandboxError):
    """A template build failed on the server.

    ``step`` names the failing step as written (``"base"``, ``"1"``... or
    ``"finalize"``; see ``Template.user_steps``), ``origin`` the Dockerfile line it came
    from when known, ``reason`` the server's one line (``RUN failed with exit code 3``),
    and ``logs`` the step's output (its last lines).
    """

    def __init__(self, message: str, *, template_id: str, build_id: str,
                 step: str | None = None, origin: Origin | None = None,
                 instruction: str | None = None,
                 logs: Sequence[BuildLogEntry] = ()) -> None:
        where = ""
        if step is not None:
            where = f"step {step}"
            if origin is not None:
                where += f" ({origin}"
                where += f": {instruction})" if instruction else ")"
            elif instruction:
                where += f" ({instruction})"
            where += ": "
        super().__init__(f"build {build_id} of {template_id} failed: {where}{message}")
        self.reason = message
        self.template_id = template_id
        self.build_id = build_id
        self.step = step
        self.origin = origin
        self.instruction = instruction
        self.logs = list(logs)
