"""A Dockerfile into a template recipe: Bac's Dockerfile subset, with Docker's rules.

Supported: ``FROM`` (one stage), ``RUN``, ``COPY``, ``ADD`` (local files and archives),
``ENV``, ``ARG`` (``--build-arg`` overrides; an ``ARG`` before ``FROM`` is visible to
``FROM`` only, and after it when declared again), ``WORKDIR``, ``USER``, ``CMD`` and
``ENTRYPOINT`` (the start command, combined as Docker combines them), ``HEALTHCHECK CMD``
(the ready command). ``EXPOSE``, ``LABEL``, ``VOLUME``, ``STOPSIGNAL`` and ``MAINTAINER``
are ignored with a warning; anything else is an error naming the file and line (a word
that is no instruction at all also names the nearest one: ``FRM`` → ``did you mean FROM?``).

As in Docker, steps run as ``root`` in ``/`` until ``USER``/``WORKDIR`` say otherwise; like
E2B's conversion, the template's sandboxes then default to ``user`` in ``/home/user``
unless the Dockerfile set them. ARG values reach ``RUN`` commands as exported variables
(``export NAME='value';`` before the command), which also keys the step's cache on them.

The result is plain data (:class:`DockerfileRecipe`); ``Template.from_dockerfile`` makes
a :class:`~bac.Template` of it, so the converter depends on the step model only.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from e2b_dockerfile_utils import DockerfileInstruction

from bac._template._dockerfile import _copy as copying
from bac._template._dockerfile import _start as starting
from bac._template._dockerfile._state import Conversion
from bac._template._dockerfile._syntax import read_dockerfile
from bac._template._errors import DockerfileError, DockerfileWarning, Origin
from bac._template._steps import BaseRef, FromKind, TemplateStep, classify_from

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


@dataclass(frozen=True)
class DockerfileRecipe:
    """What a Dockerfile says: the base, the build steps, how the sandboxes start."""

    base: BaseRef
    steps: tuple[TemplateStep, ...]
    start_command: str | None
    ready_command: str | None
    warnings: tuple[DockerfileWarning, ...]


def _from(conv: Conversion, ins: DockerfileInstruction) -> None:
    if conv.base is not None:
        raise conv.fail("a second FROM: multi-stage builds are not supported "
                        "(build the first stage as its own template and FROM it)")
    flags = conv.flags(ins, {"platform"})
    if "platform" in flags:
        conv.warn("FROM --platform is ignored: templates use the server's architecture")
    env = {k: v for k, v in conv.global_args.items() if v is not None}
    words = [conv.expand(word, env) for word in ins.args]
    if not words or not (len(words) == 1 or (len(words) == 3 and words[1].lower() == "as")):
        raise conv.fail("FROM needs an image or a template, optionally followed by AS NAME")
    conv.base = BaseRef(words[0], conv.from_kind or classify_from(words[0]))
    # Docker's steps start as root in /; a template's as its default user: say so.
    conv.add_default("USER", ["root"])
    conv.add_default("WORKDIR", ["/"])


def _arg(conv: Conversion, ins: DockerfileInstruction) -> None:
    if not ins.args:
        raise conv.fail("ARG needs a name, optionally NAME=default")
    scope = conv.scope()
    for item in ins.args:
        raw_name, has_default, raw_default = item.partition("=")
        name = conv.expand(raw_name, scope)
        if not _NAME.fullmatch(name):
            raise conv.fail(f"invalid ARG name {name!r}")
        value = conv.expand(raw_default, scope) if has_default else None
        if name in conv.build_args:
            value = conv.build_args[name]
            conv.used.add(name)
        if conv.base is None:
            conv.global_args[name] = value
            continue
        if value is None:
            value = conv.global_args.get(name)
        if value is not None:
            conv.args[name] = value


def _env(conv: Conversion, ins: DockerfileInstruction) -> None:
    if not ins.args:
        raise conv.fail("ENV needs NAME=value (or NAME value)")
    pairs: list[tuple[str, str]] = []
    # The parser gives (name, value, "=" or "") triples, both forms alike.
    for index in range(0, len(ins.args), 3):
        name = conv.expand(ins.args[index])
        if not name or any(ch.isspace() for ch in name):
            raise conv.fail(f"invalid ENV name {name!r}")
        pairs.append((name, conv.defer(ins.args[index + 1])))
    conv.env.update(pairs)
    conv.add("ENV", [item for pair in pairs for item in pair])


def _workdir(conv: Conversion, ins: DockerfileInstruction) -> None:
    # Docker's WORKDIR is the whole rest of the line: `WORKDIR /my dir` is "/my dir".
    path = conv.expand(ins.args[0]) if ins.args else ""
    if not path:
        raise conv.fail("WORKDIR needs exactly one argument, got 0")
    trail = "/" if path.endswith("/") and path != "/" else ""
    conv.workdir = posixpath.normpath(posixpath.join(conv.workdir, path)) + trail
    conv.workdir_set = True
    conv.add("WORKDIR", [conv.workdir])


def _user(conv: Conversion, ins: DockerfileInstruction) -> None:
    # Docker takes `USER a b` as the user "a b", which no account is: refused here.
    words = conv.expand_words(ins.args[0]) if ins.args else []
    if len(words) != 1:
        raise conv.fail(f"USER needs exactly one argument, got {len(words)}")
    conv.user_set = True
    conv.add("USER", words)


_HANDLERS: dict[str, Callable[[Conversion, DockerfileInstruction], None]] = {
    "FROM": _from,
    "ARG": _arg,
    "ENV": _env,
    "WORKDIR": _workdir,
    "USER": _user,
    "RUN": copying.run,
    "COPY": lambda conv, ins: copying.copy(conv, ins, add=False),
    "ADD": lambda conv, ins: copying.copy(conv, ins, add=True),
    "CMD": starting.cmd,
    "ENTRYPOINT": starting.entrypoint,
    "HEALTHCHECK": starting.healthcheck,
}


# The handlers that read their instruction's flags; the others have none.
_FLAGGED = frozenset({"FROM", "RUN", "COPY", "ADD", "HEALTHCHECK"})


def _handle(conv: Conversion, ins: DockerfileInstruction) -> None:
    conv.ins = ins
    name = ins.name
    if conv.base is None and name not in ("ARG", "FROM"):
        raise conv.fail(f"{name} before FROM: only ARG may come before the first FROM")
    handler = _HANDLERS.get(name)
    if handler is not None:
        if name not in _FLAGGED:
            conv.flags(ins, ())
        handler(conv, ins)
    elif name in _IGNORED:
        conv.warn(f"{name} is ignored: {_IGNORED[name]}")
    else:
        raise conv.fail(f"{name} is not supported: "
                        f"{_REFUSED.get(name, 'it is not in the Dockerfile subset')}")


def _finish(conv: Conversion, file: str) -> DockerfileRecipe:
    if conv.base is None:
        raise DockerfileError("no FROM instruction", file=file)
    conv.ins = None
    if not conv.user_set:
        conv.add_default("USER", ["user"])
    if not conv.workdir_set:
        conv.add_default("WORKDIR", ["/home/user"])
    unused = sorted(set(conv.build_args) - conv.used - _PROXY_ARGS)
    if unused:
        conv.warnings.append(DockerfileWarning(
            f"build args not consumed by any ARG: {', '.join(unused)}", None))
    return DockerfileRecipe(conv.base, tuple(conv.steps),
                            starting.start_command(conv.cmd, conv.entrypoint) or None,
                            conv.ready or None, tuple(conv.warnings))


def parse_dockerfile(text: str, *, file: str = "Dockerfile", context: str | Path = ".",
                     build_args: Mapping[str, str] | None = None,
                     from_kind: FromKind | None = None) -> DockerfileRecipe:
    """What a Dockerfile's ``text`` says; raise :class:`DockerfileError` (file, line, what
    was expected) on anything outside the subset. ``context`` is where ADD finds archives."""
    doc = read_dockerfile(text, file, [*_HANDLERS, *_IGNORED, *_REFUSED])
    conv = Conversion(file, Path(context), doc.escape_token, build_args or {}, from_kind)
    conv.warnings.extend(DockerfileWarning(warning.message, Origin(file, warning.line))
                         for warning in doc.warnings)
    for instruction in doc.instructions:
        _handle(conv, instruction)
    return _finish(conv, file)
