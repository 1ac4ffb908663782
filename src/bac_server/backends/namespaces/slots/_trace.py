"""Each sandbox's trace socket: where its envd reports the processes and transfers it ran.

A slot's ``trace/`` directory (root's, traversable by the sandbox's root gid) is bound
read-only at ``/run/bac`` inside; in it the host binds a unix datagram socket,
``trace.sock``, owned by the sandbox's root and writable by it alone (mode 0200): the
sandbox's own user cannot send, its root (envd's user) can. Read-only mounts still let a
sender reach a socket: only regular files, directories and links are refused there.

Attribution is by the socket a datagram arrived on, never by what it says: each socket
belongs to one slot, and the slot to the sandbox the table holds it for at that moment
(a pooled slot's, or a gone sandbox's, datagrams are counted and dropped). Nothing here
reads a datagram's contents; the sink the control plane installs validates and bounds
them (``backends.base.TraceSink``). The socket is made when the slot enters the table and
again when a restarted server re-attaches it; the directory is bound from the slot's
start, so a socket made later is seen inside at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable

from bac_server.backends.base import TraceSink
from bac_server.host import IdRange

from ._files import CA_FILE, make_trace_dir, write_ca
from ._record import SlotPaths

_log = logging.getLogger(__name__)

SOCKET_NAME = "trace.sock"
SANDBOX_DIR = "/run/bac"
# Larger datagrams are cut by the kernel on receipt (the sink refuses them as truncated).
MAX_DATAGRAM = 16 * 1024
_RECEIVE_BUFFER = 256 * 1024


class _Reader(asyncio.DatagramProtocol):
    def __init__(self, slot: str, deliver: Callable[[str, bytes], None]) -> None:
        self._slot = slot
        self._deliver = deliver

    def datagram_received(self, data: bytes, addr: object) -> None:
        self._deliver(self._slot, data)

    def error_received(self, exc: Exception) -> None:  # pragma: no cover - kernel's word
        _log.debug("trace socket of slot %s: %s", self._slot, exc)


class TraceSockets:
    """The sockets of the slots in the table; ``sandbox_of`` names a slot's sandbox now."""

    def __init__(self, ids: IdRange, sandbox_of: Callable[[str], str | None],
                 ca: bytes = b"") -> None:
        """``ca``: the operator's CA certificates, written beside each slot's socket."""
        self._ids = ids
        self._ca = ca
        self._sandbox_of = sandbox_of
        self._transports: dict[str, asyncio.DatagramTransport] = {}
        self.sink: TraceSink | None = None
        self.dropped = 0  # datagrams no sandbox could be named for, or with no sink

    async def open(self, slot: str, paths: SlotPaths) -> None:
        """Bind the slot's socket (again: a stale file from a previous server is replaced).
        A slot laid out before traces existed gets its directory, unseen inside; a
        failure is logged, never fails the sandbox."""
        if slot in self._transports:
            return
        path = paths.trace / SOCKET_NAME
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        try:
            if not paths.trace.is_dir():
                make_trace_dir(paths, self._ids, self._ca)
            elif self._ca and not (paths.trace / CA_FILE).exists():
                write_ca(paths, self._ca)  # a slot copied from one made without them
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            sock.bind(str(path))
            # SECURITY: only the sandbox's root may send (write permission on the inode).
            os.chown(path, self._ids.root, self._ids.root)
            os.chmod(path, 0o200)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RECEIVE_BUFFER)
            sock.setblocking(False)
            loop = asyncio.get_running_loop()
            transport, _ = await loop.create_datagram_endpoint(
                lambda: _Reader(slot, self._deliver), sock=sock)
        except OSError as exc:
            sock.close()
            _log.warning("trace socket of slot %s not bound: %s", slot, exc)
            return
        self._transports[slot] = transport

    def close(self, slot: str, paths: SlotPaths) -> None:
        transport = self._transports.pop(slot, None)
        if transport is not None:
            transport.close()
        with contextlib.suppress(OSError):
            (paths.trace / SOCKET_NAME).unlink()

    def close_all(self) -> None:
        """The server stops: the sockets close, their files stay for the next one."""
        for transport in self._transports.values():
            transport.close()
        self._transports.clear()

    def _deliver(self, slot: str, data: bytes) -> None:
        sandbox_id = self._sandbox_of(slot)
        sink = self.sink
        if sandbox_id is None or sink is None:
            self.dropped += 1
            return
        try:
            sink(sandbox_id, data)
        except Exception:  # the sink's bug must not stop the reader
            self.dropped += 1
            _log.exception("trace sink failed for sandbox %s", sandbox_id)
