"""A Dockerfile into a :class:`~bac.Template`: Bac's Dockerfile subset, with Docker's rules.

Supported: ``FROM`` (one stage), ``RUN``, ``COPY``, ``ADD`` (local files and archives),
``ENV``, ``ARG`` (``--build-arg`` overrides; an ``ARG`` before ``FROM`` is visible to
``FROM`` only, and after it when declared again), ``WORKDIR``, ``USER``, ``CMD`` and
``ENTRYPOINT`` (the start command, combined as Docker combines them), ``HEALTHCHECK CMD``
(the ready command). ``EXPOSE``, ``LABEL``, ``VOLUME``, ``STOPSIGNAL`` and ``MAINTAINER``
are ignored with a warning; anything else is an error naming the file and line.

As in Docker, steps run as ``root`` in ``/`` until ``USER``/``WORKDIR`` say otherwise; like
E2B's conversion, the template's sandboxes then default to ``user`` in ``/home/user``
unless the Dockerfile set them. ARG values reach ``RUN`` commands as exported variables
(``export NAME='value';`` before the command), which also keys the step's cache on them.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from bac import _dockerfile_copy as copying
from bac import _dockerfile_start as starting
from bac._dockerfile_lines import RawInstruction, read_dockerfile
from bac._dockerfile_words import WordError, process_word, process_words
from bac._template._errors import DockerfileError, DockerfileWarning, Origin
from bac._template._recipe import StrPath, Template
from bac._template._steps import BaseRef, FromKind, StepType, classify_from

_IGNORED = {
    "EXPOSE": "ports of a sandbox are all reachable through the gateway",
    "LABEL": "templates have no labels",
    "VOLUME": "a sandbox's whole filesystem is writable",
    "STOPSIGNAL": "sandboxes are stopped by the server",
    "MAINTAINER": "it is deprecated",
}
_REFUSED = {
    "SHELL": "RUN always uses /bin/sh -c; call another shell inside the command",
    "ONBUILD": "templates have no deferred instructions",
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Docker passes these through to RUN without an ARG, and never warns about them.
_PROXY_ARGS = frozenset(
    name for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY", "ALL_PROXY")
    for name in (proxy, proxy.lower()))


class _Converter:
    def __init__(self, template: Template, escape: str, build_args: Mapping[str, str],
                 from_kind: FromKind | None) -> None:
        self.template = template
        self.escape = escape
        self.build_args = dict(build_args)
        self.from_kind = from_kind
        self.used: set[str] = set()
        self.global_args: dict[str, str | None] = {}
        self.args: dict[str, str] = {}
        self.env: dict[str, str] = {}
        self.workdir = "/"
        self.user_set = self.workdir_set = False
        self.seen_from = False
        self.cmd: starting.Command | None = None
        self.entrypoint: starting.Command | None = None
        self.ready: str | None = None
        self.ins: RawInstruction | None = None

    # -- helpers ---------------------------------------------------------------------------

    @property
    def origin(self) -> Origin | None:
        return self.ins.origin if self.ins is not None else None

    def fail(self, message: str) -> DockerfileError:
        return DockerfileError(message, self.origin)

    def warn(self, message: str) -> None:
        self.template.warnings.append(DockerfileWarning(message, self.origin))

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

    def add(self, kind: StepType, args: Sequence[str], text: str | None = None) -> None:
        text = text or (self.ins.text if self.ins is not None else "")
        self.template._add(kind, tuple(args), self.origin,
                           text if len(text) <= 100 else text[:97] + "...")

    def one_word(self, ins: RawInstruction) -> str:
        words = self.words(ins.rest)
        if len(words) != 1:
            raise self.fail(f"{ins.name} needs exactly one argument, got {len(words)}")
        return words[0]

    # -- instructions ----------------------------------------------------------------------

    def handle(self, ins: RawInstruction) -> None:
        self.ins = ins
        name = ins.name
        if not self.seen_from and name not in ("ARG", "FROM"):
            raise self.fail(f"{name} before FROM: only ARG may come before the first FROM")
        handler = getattr(self, f"do_{name.lower()}", None)
        if handler is not None:
            handler(ins)
        elif name in _IGNORED:
            self.warn(f"{name} is ignored: {_IGNORED[name]}")
        elif name in _REFUSED:
            raise self.fail(f"{name} is not supported: {_REFUSED[name]}")
        else:
            raise self.fail(f"unknown instruction {name}")

    def do_from(self, ins: RawInstruction) -> None:
        if self.seen_from:
            raise self.fail("a second FROM: multi-stage builds are not supported "
                            "(build the first stage as its own template and FROM it)")
        flags, rest = copying.flags(self, ins, {"platform"})
        if "platform" in flags:
            self.warn("FROM --platform is ignored: templates use the server's architecture")
        env = {k: v for k, v in self.global_args.items() if v is not None}
        try:
            words = process_words(rest, self.escape, env)
        except WordError as exc:
            raise self.fail(str(exc)) from exc
        if not words or not (len(words) == 1 or (len(words) == 3 and words[1].lower() == "as")):
            raise self.fail("FROM needs an image or a template, optionally followed by AS NAME")
        self.seen_from = True
        kind = self.from_kind or classify_from(words[0])
        self.template._base = BaseRef(words[0], kind)
        self.add("USER", ["root"], "USER root (Docker's default)")
        self.add("WORKDIR", ["/"], "WORKDIR / (Docker's default)")

    def do_arg(self, ins: RawInstruction) -> None:
        words = self.words(ins.rest)
        if not words:
            raise self.fail("ARG needs a name, optionally NAME=default")
        for item in words:
            name, has_default, default = item.partition("=")
            if not _NAME.fullmatch(name):
                raise self.fail(f"invalid ARG name {name!r}")
            value: str | None = default if has_default else None
            if name in self.build_args:
                value = self.build_args[name]
                self.used.add(name)
            if not self.seen_from:
                self.global_args[name] = value
                continue
            if value is None:
                value = self.global_args.get(name)
            if value is not None:
                self.args[name] = value

    def do_env(self, ins: RawInstruction) -> None:
        first = ins.rest.split(None, 1)
        if not first:
            raise self.fail("ENV needs NAME=value (or NAME value)")
        pairs: list[tuple[str, str]] = []
        if "=" in first[0]:
            for item in self.words(ins.rest, keep_unknown=True):
                name, has_value, value = item.partition("=")
                if not has_value:
                    raise self.fail(f"ENV expects NAME=value, got {item!r}")
                pairs.append((name, value))
        else:
            if len(first) < 2:
                raise self.fail(f"ENV {first[0]} needs a value")
            pairs.append((first[0], self.word(first[1], keep_unknown=True)))
        for name, _ in pairs:
            if not name or any(ch.isspace() for ch in name):
                raise self.fail(f"invalid ENV name {name!r}")
        self.env.update(pairs)
        self.add("ENV", [item for pair in pairs for item in pair])

    def do_workdir(self, ins: RawInstruction) -> None:
        path = self.one_word(ins)
        trail = "/" if path.endswith("/") and path != "/" else ""
        self.workdir = posixpath.normpath(posixpath.join(self.workdir, path)) + trail
        self.workdir_set = True
        self.add("WORKDIR", [self.workdir])

    def do_user(self, ins: RawInstruction) -> None:
        self.user_set = True
        self.add("USER", [self.one_word(ins)])

    def do_run(self, ins: RawInstruction) -> None:
        copying.run(self, ins)

    def do_copy(self, ins: RawInstruction) -> None:
        copying.copy(self, ins, add=False)

    def do_add(self, ins: RawInstruction) -> None:
        copying.copy(self, ins, add=True)

    def do_cmd(self, ins: RawInstruction) -> None:
        self.cmd = starting.command(ins.rest)

    def do_entrypoint(self, ins: RawInstruction) -> None:
        self.entrypoint = starting.command(ins.rest)

    def do_healthcheck(self, ins: RawInstruction) -> None:
        self.ready = starting.healthcheck(self, ins)

    # -- the end ---------------------------------------------------------------------------

    def finish(self, file: str) -> None:
        if not self.seen_from:
            raise DockerfileError("no FROM instruction", file=file)
        self.ins = None
        start = starting.start_command(self.cmd, self.entrypoint)
        if start:
            self.template.start_cmd(start)
        if self.ready:
            self.template.ready_cmd(self.ready)
        if not self.user_set:
            self.template._add("USER", ("user",))
        if not self.workdir_set:
            self.template._add("WORKDIR", ("/home/user",))
        unused = sorted(set(self.build_args) - self.used - _PROXY_ARGS)
        if unused:
            self.template.warnings.append(DockerfileWarning(
                f"build args not consumed by any ARG: {', '.join(unused)}",
                None))


def parse_dockerfile(text: str, *, file: str = "Dockerfile", context: StrPath = ".",
                     build_args: Mapping[str, str] | None = None,
                     from_kind: FromKind | None = None, ignore: Sequence[str] = (),
                     dockerignore: Path | None = None) -> Template:
    """Turn a Dockerfile's ``text`` into a :class:`Template`; raise :class:`DockerfileError`
    (file, line, what was expected) on anything outside the subset."""
    doc = read_dockerfile(text, file)
    template = Template(context=context, ignore=ignore)
    if dockerignore is not None and dockerignore.is_file():
        template._dockerignore = dockerignore
    converter = _Converter(template, doc.escape, build_args or {}, from_kind)
    for instruction in doc.instructions:
        converter.handle(instruction)
    converter.finish(file)
    return template
