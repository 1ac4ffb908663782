"""One Dockerfile's conversion as it goes: what is in scope, what was made, where we are.

Every instruction's handler (:mod:`._convert`, :mod:`._copy`, :mod:`._start`) reads and
changes a :class:`Conversion`: the variables ``$NAME`` may name (ARGs, then ENV), the
current ``WORKDIR``, the steps and warnings made so far, and the instruction being read,
whose file and line go into every error, warning and step it causes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from bac._template._dockerfile._lines import RawInstruction
from bac._template._dockerfile._words import WordError, process_word, process_words, split_flags
from bac._template._errors import DockerfileError, DockerfileWarning, Origin
from bac._template._steps import BaseRef, FromKind, StepType, TemplateStep

Command = tuple[bool, list[str]]  # (exec form, argv) or (shell form, [text])


class Conversion:
    def __init__(self, context: Path, escape: str, build_args: Mapping[str, str],
                 from_kind: FromKind | None) -> None:
        self.context = context  # COPY/ADD sources are read from here (ADD of an archive)
        self.escape = escape
        self.build_args = dict(build_args)
        self.from_kind = from_kind
        self.used: set[str] = set()
        self.global_args: dict[str, str | None] = {}
        self.args: dict[str, str] = {}
        self.env: dict[str, str] = {}
        self.workdir = "/"
        self.user_set = self.workdir_set = False
        self.base: BaseRef | None = None
        self.steps: list[TemplateStep] = []
        self.warnings: list[DockerfileWarning] = []
        self.cmd: Command | None = None
        self.entrypoint: Command | None = None
        self.ready: str | None = None
        self.ins: RawInstruction | None = None
        self._written = 0  # how many instructions made steps so far
        self._last: RawInstruction | None = None  # the latest of them

    @property
    def origin(self) -> Origin | None:
        return self.ins.origin if self.ins is not None else None

    def fail(self, message: str) -> DockerfileError:
        return DockerfileError(message, self.origin)

    def warn(self, message: str) -> None:
        self.warnings.append(DockerfileWarning(message, self.origin))

    def scope(self) -> dict[str, str]:
        """Variables ``$NAME`` may name here: ARGs in scope, then ENV (which wins)."""
        return {**self.args, **self.env}

    def words(self, text: str, keep_unknown: bool = False) -> list[str]:
        try:
            return process_words(text, self.escape, self.scope(), keep_unknown)
        except WordError as exc:
            raise self.fail(str(exc)) from exc

    def word(self, text: str, keep_unknown: bool = False) -> str:
        try:
            return process_word(text, self.escape, self.scope(), keep_unknown)
        except WordError as exc:
            raise self.fail(str(exc)) from exc

    def one_word(self, ins: RawInstruction) -> str:
        words = self.words(ins.rest)
        if len(words) != 1:
            raise self.fail(f"{ins.name} needs exactly one argument, got {len(words)}")
        return words[0]

    def flags(self, ins: RawInstruction,
              allowed: set[str] | frozenset[str]) -> tuple[dict[str, str | None], str]:
        """The instruction's leading ``--flags`` (unknown ones are an error) and the rest."""
        try:
            found, rest = split_flags(ins.rest)
        except WordError as exc:
            raise self.fail(str(exc)) from exc
        out: dict[str, str | None] = {}
        for name, value in found:
            if name not in allowed:
                raise self.fail(f"unknown flag for {ins.name}: --{name}")
            out[name] = value
        return out, rest

    def add(self, kind: StepType, args: Sequence[str]) -> None:
        """A step made by the current instruction (all of an instruction's steps are one
        step as written: ``user_step``)."""
        if self.ins is not self._last:
            self._written += 1
            self._last = self.ins
        text = self.ins.text if self.ins is not None else ""
        self.steps.append(TemplateStep(kind, tuple(args), False, self.origin,
                                       text if len(text) <= 100 else text[:97] + "...",
                                       self._written))

    def add_default(self, kind: StepType, args: Sequence[str]) -> None:
        """A step no instruction wrote (Docker's and E2B's default user and workdir)."""
        self.steps.append(TemplateStep(kind, tuple(args)))
