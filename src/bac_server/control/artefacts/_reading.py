"""Reading a file or a directory out of a running sandbox, through its envd.

SECURITY: the bytes are read inside the sandbox by a process envd starts as the sandbox's
default user (no user named: envd's ``/init`` default), never by opening a path under the
sandbox's root file system from the host: there a symlink the sandbox made would be
followed by the host's root and could read the host's files. Inside, the same symlink
resolves in the sandbox's own mount namespace, with the user's own permissions.

The process is one Python program (every template has ``python3``: envd needs it), run
isolated (``-I``: no ``PYTHON*`` variables, no working directory on ``sys.path``, so a
``tarfile.py`` of the user's is never imported), started through the generated Connect
client (``bac_protocol``), as
``backends/envd_ready.py`` runs a ready check. Its stdout is one byte saying what the
path is (``F`` a regular file, ``D`` a directory) and then its bytes: a file's as they
are, a directory's as a tar made the same way every time (names sorted, owners, groups
and times zeroed, only regular files, directories, symlinks (kept as links, never
followed) and hard links; devices, FIFOs and sockets left out), so the same tree promoted
twice hashes the same. A failure exits non-zero with one line on stderr.

Error tree::

    ReadFailed          envd could not be reached, or the program failed (message says)
    ├── PathNotFound    the path does not exist in the sandbox
    └── TooLarge        the bytes passed the bound the caller set (the program is killed)
    SinkFailed          the caller's sink failed to keep the bytes (an ``OSError``)
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

import pyqwest
from connectrpc.errors import ConnectError
from protobuf import Oneof

from bac_protocol.envd.process_connect import ProcessClient
from bac_protocol.envd.process_pb import (
    ProcessConfig,
    ProcessEvent,
    ProcessSelector,
    SendSignalRequest,
    Signal,
    StartRequest,
)
from bac_server.cancel_safe import to_the_end

_MAX_MESSAGE = 4 << 20
_STDERR_TAIL = 600
_NOT_FOUND, _NOT_COPYABLE = 3, 4

# argv[1]: the path. Runs in the sandbox, as its default user.
_PROGRAM = r"""
import os, stat, sys, tarfile
path, out = sys.argv[1], sys.stdout.buffer
try:
    st = os.stat(path)
except FileNotFoundError:
    sys.stderr.write("no such file or directory: %s\n" % path); sys.exit(3)
except OSError as exc:
    sys.stderr.write("%s: %s\n" % (path, exc.strerror)); sys.exit(4)
if stat.S_ISREG(st.st_mode):
    with open(path, "rb") as f:
        out.write(b"F")
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            out.write(chunk)
elif stat.S_ISDIR(st.st_mode):
    def same(info):
        if not (info.isfile() or info.isdir() or info.issym() or info.islnk()):
            return None
        info.uid = info.gid = info.mtime = 0
        info.uname = info.gname = ""
        return info
    out.write(b"D")
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        tar.add(path, arcname=".", recursive=True, filter=same)
else:
    sys.stderr.write("%s is neither a file nor a directory\n" % path); sys.exit(4)
out.flush()
"""


def _pid(pid: int) -> Oneof[Literal["pid"], int]:
    return Oneof("pid", pid)


class ReadFailed(Exception):
    pass


def _kind(first: bytes) -> Kind:
    # What the program wrote first; anything else is not our program's output (python3
    # in the sandbox is the sandbox's own, and may be anything).
    for kind in Kind:
        if first == kind.value.encode():
            return kind
    raise ReadFailed("the copy program in the sandbox wrote something unexpected "
                     "(is its python3 a Python?)")


class PathNotFound(ReadFailed):
    pass


class SinkFailed(Exception):
    """Keeping the bytes failed on the host (the message says why; ``__cause__`` is the
    ``OSError``): not the sandbox's fault."""


class TooLarge(ReadFailed):
    pass


class Kind(enum.Enum):
    FILE = "F"
    DIRECTORY = "D"


@dataclass(frozen=True)
class Envd:
    """Where a sandbox's envd listens and the token it expects (the registry's route)."""

    address: str
    port: int
    access_token: str


async def read_out(envd: Envd, path: str, sink: Callable[[bytes], Awaitable[None]], *,
                   max_bytes: int | None, timeout_s: float,
                   http_client: pyqwest.Client | None = None) -> Kind:
    """Send the path's bytes (a directory's as a tar) to ``sink`` in pieces, as they come;
    returns what the path was. ``max_bytes``: more is ``TooLarge`` (None: no bound).
    ``http_client``: how to reach envd (``backends.dialing.connect_client``; None:
    directly)."""
    request = StartRequest(
        process=ProcessConfig(cmd="/bin/sh",
                              args=["-c", 'exec python3 -I -c "$0" "$1"', _PROGRAM, path]),
        stdin=False)
    headers = {"X-Access-Token": envd.access_token} if envd.access_token else {}
    kind: Kind | None = None
    pid, size, stderr, end = 0, 0, b"", None
    try:
        async with ProcessClient(f"http://{envd.address}:{envd.port}",
                                 send_compression=None, accept_compression=(),
                                 read_max_bytes=_MAX_MESSAGE,
                                 http_client=http_client) as client:
            try:
                async for response in client.start(request, headers=headers,
                                                   timeout_ms=int(timeout_s * 1000)):
                    match response.event.event if response.event is not None else None:
                        case Oneof(field="start", value=ProcessEvent.StartEvent() as started):
                            pid = started.pid
                        case Oneof(field="data", value=ProcessEvent.DataEvent(
                                output=Oneof(field="stdout", value=bytes() as chunk))):
                            if kind is None and chunk:
                                kind = _kind(chunk[:1])
                                chunk = chunk[1:]
                            size += len(chunk)
                            if max_bytes is not None and size > max_bytes:
                                raise TooLarge(f"more than {max_bytes} bytes")
                            if chunk:
                                try:
                                    await sink(chunk)
                                except OSError as exc:  # the host's side, not envd's
                                    raise SinkFailed(str(exc)) from exc
                        case Oneof(field="data", value=ProcessEvent.DataEvent(
                                output=Oneof(field="stderr", value=bytes() as chunk))):
                            stderr = (stderr + chunk)[-_STDERR_TAIL:]
                        case Oneof(field="end", value=ProcessEvent.EndEvent() as ended):
                            end = ended
                        case _:
                            pass
            except BaseException:
                # Too large, the host's side failed, or the caller is gone: the program
                # must not go on writing into nothing until its deadline.
                if pid and end is None:
                    with contextlib.suppress(ConnectError, OSError, TimeoutError):
                        await to_the_end(client.send_signal(
                            SendSignalRequest(process=ProcessSelector(
                                selector=_pid(pid)), signal=Signal.SIGKILL),
                            headers=headers, timeout_ms=5000))
                raise
    except ConnectError as exc:
        raise ReadFailed(f"envd refused the copy: {exc}") from exc
    except (OSError, ValueError) as exc:
        raise ReadFailed(f"the copy lost envd: {exc}") from exc
    said = stderr.decode(errors="replace").strip()
    if end is None:
        raise ReadFailed("the copy ended without an exit status")
    if end.exited and end.exit_code == _NOT_FOUND:
        raise PathNotFound(said or f"{path}: not found")
    if not end.exited or end.exit_code != 0 or kind is None:
        status = end.status or f"exit code {end.exit_code}"
        raise ReadFailed(f"reading {path!r} in the sandbox failed ({status})"
                         + (f": {said.splitlines()[-1]}" if said else ""))
    return kind
