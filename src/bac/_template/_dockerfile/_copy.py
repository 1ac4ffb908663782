"""``RUN``, ``COPY`` and ``ADD`` of a Dockerfile into build steps (see :mod:`._convert`).

``COPY a b dir/`` becomes one COPY step per source, each with its own files hash, so a
change to one source rebuilds from that step on (a build still shows it as one step).
Destinations are made absolute against the current ``WORKDIR``, as Docker resolves them.
``ADD`` copies local files like ``COPY`` and unpacks a local tar archive (plain, gzip,
bzip2 or xz) into its destination, through a COPY to a staging directory and a ``tar -x``
step; ``ADD`` of a URL is refused.
Heredocs: ``RUN <<EOF`` runs the body as a script (with its ``#!`` interpreter, if any);
``COPY <<EOF /path`` writes the body to ``/path``.
"""

from __future__ import annotations

import base64
import posixpath
import re
import shlex
from pathlib import Path

from e2b_dockerfile_utils import (
    DockerfileHeredoc,
    DockerfileInstruction,
    chomp_heredoc_content,
    parse_heredoc,
)

from bac._template._dockerfile._state import Conversion
from bac._template._steps import check_source

_CHMOD = re.compile(r"[0-7]{3,4}")
_REFUSED_FLAGS = {
    "from": "multi-stage builds are not supported (build that stage as its own template "
            "and FROM it)",
    "parents": "it is not supported",
    "exclude": "it is not supported; use .dockerignore",
    "checksum": "ADD from a URL is not supported",
    "keep-git-dir": "ADD from a git repository is not supported",
    "unpack": "it is not supported",
}
_RUN_IGNORED = frozenset({"mount", "network", "security", "device"})


def _body(heredoc: DockerfileHeredoc) -> str:
    """The heredoc's lines (``<<-``: without their leading tabs)."""
    return chomp_heredoc_content(heredoc.content) if heredoc.chomp else heredoc.content


def _heredoc_name(word: str) -> str | None:
    """The name of the heredoc ``word`` opens (``<<EOF``, ``<<-"EOF"``), if it opens one."""
    try:
        heredoc = parse_heredoc(word)
    except ValueError:
        return None
    return heredoc.name if heredoc is not None else None


def _script(body: str) -> str:
    """A bare ``RUN <<EOF``: the body is the script, run by its ``#!`` line if it has one."""
    first, _, _ = body.partition("\n")
    if not first.startswith("#!"):
        return body
    delimiter = "BAC_SCRIPT_EOF"
    return f"{first[2:].strip()} <<'{delimiter}'\n{body}{delimiter}\n"


def run(conv: Conversion, ins: DockerfileInstruction) -> None:
    for name in conv.flags(ins, _RUN_IGNORED):
        conv.warn(f"RUN --{name} is ignored: build steps run with the sandbox's defaults")
    line = ins.args[0] if ins.args and not ins.json else ""
    if ins.json:
        command = shlex.join(ins.args)
    elif len(ins.heredocs) == 1 and _heredoc_name(line.strip()) is not None:
        command = _script(_body(ins.heredocs[0]))
    elif ins.heredocs:  # for the shell: the command, then each heredoc and its end
        command = line + "\n" + "".join(_body(h) + h.name + "\n" for h in ins.heredocs)
    else:
        command = line
    if not command.strip():
        raise conv.fail("RUN needs a command")
    exports = " ".join(f"{name}={shlex.quote(value)}"
                       for name, value in conv.args.items() if name not in conv.env)
    conv.add("RUN", [f"export {exports}; {command}" if exports else command])


def _destination(dest: str, workdir: str) -> str:
    is_dir = dest.endswith("/") or dest in (".", "..") or dest.endswith(("/.", "/.."))
    path = posixpath.normpath(posixpath.join(workdir, dest))
    return path + "/" if is_dir and path != "/" else path


def _is_archive(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            head = file.read(262)
    except OSError:
        return False
    return (head.startswith((b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00"))
            or head[257:262] == b"ustar")


def _inline(conv: Conversion, body: str, target: str, chown: str, chmod: str) -> None:
    data = base64.b64encode(body.encode()).decode()
    quoted = shlex.quote(target)
    command = (f"mkdir -p {shlex.quote(posixpath.dirname(target) or '/')} && "
               f"printf %s {data} | base64 -d > {quoted}")
    if chmod:
        command += f" && chmod {chmod} {quoted}"
    if chown:
        command += f" && chown {shlex.quote(chown)} {quoted}"
    conv.add("RUN", [command, "root"])


def copy(conv: Conversion, ins: DockerfileInstruction, add: bool) -> None:
    name = ins.name
    found = conv.flags(ins, {"chown", "chmod", "link", *_REFUSED_FLAGS})
    for flag, why in _REFUSED_FLAGS.items():
        if flag in found:
            raise conv.fail(f"{name} --{flag}: {why}")
    chown = conv.expand(found["chown"] or "") if "chown" in found else ""
    if "chown" in found and not chown:
        raise conv.fail(f"{name} --chown needs USER[:GROUP]")
    chmod = found.get("chmod") or ""
    if "chmod" in found and not _CHMOD.fullmatch(chmod):
        raise conv.fail(f"{name} --chmod needs octal permission bits like 0755, got {chmod!r}")
    chmod = f"{int(chmod, 8):04o}" if chmod else ""
    if len(ins.args) < 2:
        raise conv.fail(f"{name} needs at least a source and a destination")
    *sources, dest = ins.args
    dest = conv.expand(dest)
    if len(sources) > 1 and not dest.endswith("/"):
        raise conv.fail(f"{name} with several sources needs a destination directory "
                        "ending in /")
    target = _destination(dest, conv.workdir)
    heredocs = {h.name: h for h in ins.heredocs}
    for raw in sources:
        marker = _heredoc_name(raw)  # as written: a quoted "<<EOF" names a file
        if marker is not None and marker in heredocs:
            into = target.endswith("/") or len(sources) > 1
            path = posixpath.join(target, marker) if into else target
            _inline(conv, _body(heredocs[marker]), path, chown, chmod)
            continue
        src = conv.expand(raw)
        if "://" in src or src.startswith("git@"):
            raise conv.fail(f"{name} from a URL is not supported ({src}): download it in a "
                            "RUN step (curl, wget) or put the file in the build context")
        relative = check_source(src.lstrip("/") or ".", conv.origin)
        plain = not any(ch in relative for ch in "*?[")
        if add and plain and _is_archive(conv.context / relative):
            staging = f"/tmp/.bac-add-{len(conv.steps)}/"  # noqa: S108 - in the build sandbox
            archive = staging + posixpath.basename(relative)
            conv.add("COPY", [relative, staging, "", ""])
            conv.add("RUN", [f"mkdir -p {shlex.quote(target)} && tar -xf "
                             f"{shlex.quote(archive)} -C {shlex.quote(target)} && "
                             f"rm -rf {shlex.quote(staging)}", "root"])
            continue
        conv.add("COPY", [relative, target, chown, chmod])
