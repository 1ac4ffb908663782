"""One Dockerfile's conversion as it goes: what is in scope, what was made, where we are.

Every instruction's handler (:mod:`._convert`, :mod:`._copy`, :mod:`._start`) reads and
changes a :class:`Conversion`: the variables ``$NAME`` may name (ARGs, then ENV), the
current ``WORKDIR``, the steps and warnings made so far, and the instruction being read,
whose file and line go into every error, warning and step it causes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from e2b_dockerfile_utils import DockerfileInstruction

from bac._template._dockerfile import _words as words
from bac._template._errors import DockerfileError, DockerfileWarning, Origin
from bac._template._steps import BaseRef, FromKind, StepType, TemplateStep

Command = tuple[bool, list[str]]  # (exec form, argv) or (shell form, [text])


def display(ins: DockerfileInstruction) -> str:
    """The instruction as one line, for messages and the build's step names."""
    _, *rest = ins.original.split()
    return " ".join([ins.name, *rest])


class Conversion:
    def __init__(self, file: str, context: Path, escape: str, build_args: Mapping[str, str],
                 from_kind: FromKind | None) -> None:
        self.file = file
        self.context = context  # COPY/ADD sources are read from here (ADD of an archive)
        self.escape = escape
        self.build_args = dict(build_args)
        self.from_kind = from_kind
        self.used: set[str] = set()
        self.global_args: dict[str, str | None] = {}
        self.args: dict[str, str] = {}  # as written
        self.env: dict[str, str] = {}  # as sent to the build (see _words.defer)
        self.workdir = "/"
        self.user_set = self.workdir_set = False
        self.base: BaseRef | None = None
        self.steps: list[TemplateStep] = []
        self.warnings: list[DockerfileWarning] = []
        self.cmd: Command | None = None
        self.entrypoint: Command | None = None
        self.ready: str | None = None
        self.ins: DockerfileInstruction | None = None
        self._written = 0  # how many instructions made steps so far
        self._last: DockerfileInstruction | None = None  # the latest of them

    @property
    def origin(self) -> Origin | None:
        return Origin(self.file, self.ins.start_line) if self.ins is not None else None

    def fail(self, message: str) -> DockerfileError:
        return DockerfileError(message, self.origin)

    def warn(self, message: str) -> None:
        self.warnings.append(DockerfileWarning(message, self.origin))

    def scope(self) -> dict[str, str]:
        """Variables ``$NAME`` may name here: ARGs in scope, then ENV (which wins)."""
        return {**self.args, **self.env}

    def expand(self, text: str, env: Mapping[str, str] | None = None) -> str:
        """``text`` as one word, variables of ``env`` (default: the scope) substituted."""
        try:
            return words.expand(text, self.escape, self.scope() if env is None else env)
        except words.WordError as exc:
            raise self.fail(str(exc)) from exc

    def expand_words(self, text: str) -> list[str]:
        try:
            return words.expand_words(text, self.escape, self.scope())
        except words.WordError as exc:
            raise self.fail(str(exc)) from exc

    def defer(self, text: str) -> str:
        """An ENV value for the build (see :func:`._words.defer`)."""
        try:
            return words.defer(text, self.escape, self.args, self.env)
        except words.WordError as exc:
            raise self.fail(str(exc)) from exc

    def flags(self, ins: DockerfileInstruction,
              allowed: Collection[str]) -> dict[str, str | None]:
        """The instruction's ``--flags`` by name (value None without ``=``); unknown ones
        are an error."""
        out: dict[str, str | None] = {}
        for flag in ins.flags:
            name, value = words.split_flag(flag)
            if name not in allowed:
                raise self.fail(f"unknown flag for {ins.name}: --{name}")
            out[name] = value
        return out

    def add(self, kind: StepType, args: Sequence[str]) -> None:
        """A step made by the current instruction (all of an instruction's steps are one
        step as written: ``user_step``)."""
        if self.ins is not self._last:
            self._written += 1
            self._last = self.ins
        text = display(self.ins) if self.ins is not None else ""
        self.steps.append(TemplateStep(kind, tuple(args), False, self.origin,
                                       text if len(text) <= 100 else text[:97] + "...",
                                       self._written))

    def add_default(self, kind: StepType, args: Sequence[str]) -> None:
        """A step no instruction wrote (Docker's and E2B's default user and workdir)."""
        self.steps.append(TemplateStep(kind, tuple(args)))
