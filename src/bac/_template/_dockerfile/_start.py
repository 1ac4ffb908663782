"""How a template's sandboxes start, from a Dockerfile: ``CMD``, ``ENTRYPOINT``, ``HEALTHCHECK``.

The start command is ``ENTRYPOINT`` and ``CMD`` combined as Docker combines them (an exec
form ``ENTRYPOINT`` gets ``CMD`` as arguments; a shell form one ignores ``CMD``); the exec
form is quoted into one shell line. ``HEALTHCHECK CMD`` is the ready command, retried by
the sandbox until it exits 0, so its timing options have nothing to set.
"""

from __future__ import annotations

import shlex

from bac._template._dockerfile._lines import RawInstruction
from bac._template._dockerfile._state import Command, Conversion
from bac._template._dockerfile._words import json_array

_HEALTHCHECK_FLAGS = frozenset({"interval", "timeout", "start-period", "start-interval",
                                "retries"})


def _form(rest: str) -> Command:
    """``CMD``/``ENTRYPOINT`` text as its exec form or its shell form."""
    argv = json_array(rest)
    if argv is not None:
        return True, argv
    return False, [rest] if rest else []


def cmd(conv: Conversion, ins: RawInstruction) -> None:
    conv.cmd = _form(ins.rest)


def entrypoint(conv: Conversion, ins: RawInstruction) -> None:
    conv.entrypoint = _form(ins.rest)


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


def healthcheck(conv: Conversion, ins: RawInstruction) -> None:
    """``HEALTHCHECK CMD ...`` sets the ready command; ``HEALTHCHECK NONE`` clears it."""
    found, rest = conv.flags(ins, _HEALTHCHECK_FLAGS)
    if rest.strip().upper() == "NONE":
        conv.ready = None
        return
    keyword, _, command = rest.partition(" ")
    if keyword.upper() != "CMD" or not command.strip():
        raise conv.fail("HEALTHCHECK needs CMD <command> or NONE")
    if found:
        conv.warn("HEALTHCHECK options are ignored: the ready command is retried until it "
                  "exits 0")
    argv = json_array(command.strip())
    conv.ready = shlex.join(argv) if argv is not None else command.strip()
