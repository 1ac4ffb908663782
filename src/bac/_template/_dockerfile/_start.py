"""How a template's sandboxes start, from a Dockerfile: ``CMD``, ``ENTRYPOINT``, ``HEALTHCHECK``.

The start command is ``ENTRYPOINT`` and ``CMD`` combined as Docker combines them (an exec
form ``ENTRYPOINT`` gets ``CMD`` as arguments; a shell form one ignores ``CMD``); the exec
form is quoted into one shell line. ``HEALTHCHECK CMD`` is the ready command, retried by
the sandbox until it exits 0, so its timing options have nothing to set.
"""

from __future__ import annotations

import shlex

from e2b_dockerfile_utils import DockerfileInstruction

from bac._template._dockerfile._state import Command, Conversion

_HEALTHCHECK_FLAGS = frozenset({"interval", "timeout", "start-period", "start-interval",
                                "retries"})


def cmd(conv: Conversion, ins: DockerfileInstruction) -> None:
    conv.cmd = ins.json, list(ins.args)


def entrypoint(conv: Conversion, ins: DockerfileInstruction) -> None:
    conv.entrypoint = ins.json, list(ins.args)


def start_command(cmd: Command | None, entrypoint: Command | None) -> str | None:
    """ENTRYPOINT and CMD combined as Docker does, as one shell line."""
    if entrypoint is not None and entrypoint[0]:
        words = list(entrypoint[1])
        if cmd is not None and cmd[1]:
            words += cmd[1] if cmd[0] else ["/bin/sh", "-c", cmd[1][0]]
        return shlex.join(words) if words else None
    if entrypoint is not None:
        return entrypoint[1][0] if entrypoint[1] else None
    if cmd is not None and cmd[1]:
        return shlex.join(cmd[1]) if cmd[0] else cmd[1][0]
    return None


def healthcheck(conv: Conversion, ins: DockerfileInstruction) -> None:
    """``HEALTHCHECK CMD ...`` sets the ready command; ``HEALTHCHECK NONE`` clears it."""
    found = conv.flags(ins, _HEALTHCHECK_FLAGS)
    kind, *command = ins.args or [""]
    if kind.upper() == "NONE" and not command:
        conv.ready = None
        return
    if kind.upper() != "CMD" or not "".join(command).strip():
        raise conv.fail("HEALTHCHECK needs CMD <command> or NONE")
    if found:
        conv.warn("HEALTHCHECK options are ignored: the ready command is retried until it "
                  "exits 0")
    conv.ready = shlex.join(command) if ins.json else command[0]
