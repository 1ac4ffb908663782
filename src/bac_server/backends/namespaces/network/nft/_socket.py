"""A raw nftables netlink socket: each change one batch, applied whole and acknowledged.

libnftables reads the whole ruleset into its cache before each command, which grows with
the number of sandboxes on the host (~33 ms a command with 300 sandboxes' objects, 0.5-1
s at 1000). nf_tables itself needs none of that: a batch of messages (begin, the changes,
end) is applied whole or not at all, at a cost that depends on the batch, not on the
table. So every change of one sandbox is one batch (``commit``), and reading one object
or one set is one request (``request``, ``dump``).

Netlink hands a batch to nf_tables within the ``send`` call, so every answer is queued by
the time it returns. Only the last change asks for an acknowledgement (one per change
would overflow the receive buffer with a large policy); a refused change is answered with
its errno whatever its flags, and a commit the kernel refuses with an error for the
batch's begin. ``NftSocket`` is blocking and serialises its callers; it opens its socket
on first use and again after an I/O error.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import threading
from collections.abc import Sequence

from pyroute2.netlink import NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST, nlmsg_base
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.nfnetlink import NFNL_SUBSYS_NFTABLES, nfgen_msg

NETLINK_NETFILTER = 12
NLMSG_ERROR, NLMSG_DONE = 2, 3
_NFNL_MSG_BATCH_BEGIN, _NFNL_MSG_BATCH_END = 0x10, 0x11
_HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port
_ERROR = struct.Struct("=i")  # nlmsgerr: a negative errno, 0 for an acknowledgement
_SOL_NETLINK, _NETLINK_CAP_ACK = 270, 10  # errors without a copy of the refused message
_SO_SNDBUFFORCE, _SO_RCVBUFFORCE = 32, 33
_BUFFER = 8 << 20  # a policy's batch is up to a few hundred KiB
_ANSWER_TIMEOUT_S = 5.0
_RECEIVE = 1 << 16  # netlink sends at most 32 KiB a datagram
_SEQUENCES = 1 << 30


def batch_mark(kind: int, sequence: int) -> nfgen_msg:
    """The begin or end of a batch (``NFNL_MSG_BATCH_BEGIN``/``_END``)."""
    mark = nfgen_msg()
    mark["res_id"] = NFNL_SUBSYS_NFTABLES
    mark["header"]["type"] = kind
    mark["header"]["flags"] = NLM_F_REQUEST
    mark["header"]["sequence_number"] = sequence
    return mark


def batch_begin(sequence: int) -> nfgen_msg:
    return batch_mark(_NFNL_MSG_BATCH_BEGIN, sequence)


def batch_end(sequence: int) -> nfgen_msg:
    return batch_mark(_NFNL_MSG_BATCH_END, sequence)


def answer_to(data: bytes, sequence: int) -> int | None:
    """The errno the kernel answered ``sequence`` with in ``data`` (0: done), or None if
    ``data`` holds no answer to it."""
    for kind, seq, message in messages_in(data):
        if kind == NLMSG_ERROR and seq == sequence:
            return _errno(message)
    return None


def _errno(error: bytes) -> int:
    """The errno of an NLMSG_ERROR message (0: an acknowledgement)."""
    if len(error) < _HEADER.size + _ERROR.size:
        return errno.EBADMSG
    code: int = _ERROR.unpack_from(error, _HEADER.size)[0]
    return -code


def messages_in(data: bytes) -> list[tuple[int, int, bytes]]:
    """The netlink messages of one datagram: (type, sequence, the whole message)."""
    found = []
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, kind, _flags, seq, _port = _HEADER.unpack_from(data, offset)
        if length < _HEADER.size or offset + length > len(data):
            break
        found.append((kind, seq, data[offset:offset + length]))
        offset += (length + 3) & ~3
    return found


def encode_batch(changes: Sequence[nlmsg_base], first: int) -> bytes:
    """begin (``first``), the changes (``first + 1``...; the last acknowledged), end."""
    last = len(changes)
    parts = []
    for index, message in enumerate((batch_begin(first), *changes, batch_end(first + last + 1))):
        if 0 < index <= last:
            message["header"]["sequence_number"] = first + index
            if index == last:
                message["header"]["flags"] |= NLM_F_ACK
        message.encode()
        parts.append(message.data)
    return b"".join(parts)


class NftSocket:
    def __init__(self) -> None:
        self._socket: socket.socket | None = None
        self._lock = threading.Lock()
        self._sequence = 1

    def commit(self, changes: Sequence[nlmsg_base]) -> None:
        """Apply ``changes`` as one batch; raises pyroute2's ``NetlinkError`` with the
        kernel's errno if it is refused (nothing of it applied), ``OSError`` when the
        socket fails or no answer comes."""
        if not changes:
            return
        with self._lock:
            first = self._take(len(changes) + 2)
            batch = encode_batch(changes, first)
            error = self._exchange(batch, first, first + len(changes))
        if error:
            raise NetlinkError(error, os.strerror(error))

    def request(self, message: nlmsg_base) -> bytes | None:
        """One GET answered with one object: the answer, or None when the kernel has no
        such object (ENOENT)."""
        answers = self._ask(message, dump=False)
        return answers[0] if answers else None

    def dump(self, message: nlmsg_base) -> list[bytes]:
        """Every message of a dump (ENOENT, a missing table or set: none)."""
        return self._ask(message, dump=True)

    def close(self) -> None:
        with self._lock:
            self._close()

    # -- internals ----------------------------------------------------------------------

    def _take(self, count: int) -> int:
        first = self._sequence
        self._sequence = (self._sequence + count) % _SEQUENCES or 1
        if self._sequence < first:  # never let one batch's numbers wrap
            first, self._sequence = 1, 1 + count
        return first

    def _open(self) -> socket.socket:
        if self._socket is None:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC,
                                 NETLINK_NETFILTER)
            try:
                sock.setsockopt(socket.SOL_SOCKET, _SO_SNDBUFFORCE, _BUFFER)
                sock.setsockopt(socket.SOL_SOCKET, _SO_RCVBUFFORCE, _BUFFER)
                sock.setsockopt(_SOL_NETLINK, _NETLINK_CAP_ACK, 1)
                sock.bind((0, 0))
                sock.settimeout(_ANSWER_TIMEOUT_S)
            except OSError:
                sock.close()
                raise
            self._socket = sock
        return self._socket

    def _close(self) -> None:
        if self._socket is not None:
            try:
                self._socket.close()
            finally:
                self._socket = None

    def _exchange(self, batch: bytes, begin: int, last: int) -> int:
        """Send a batch; the first errno of its answers (0: applied)."""
        try:
            sock = self._open()
            sock.send(batch)
            error = 0
            while True:
                for kind, seq, message in messages_in(sock.recv(_RECEIVE)):
                    if kind != NLMSG_ERROR or not begin <= seq <= last:
                        continue
                    code = _errno(message)
                    error = error or code
                    # The last change's answer comes last; an error for the begin is
                    # the commit refused as a whole (nothing follows it).
                    if seq == last or (seq == begin and code):
                        return error
        except OSError:
            self._close()
            raise

    def _ask(self, message: nlmsg_base, dump: bool) -> list[bytes]:
        with self._lock:
            sequence = self._take(1)
            message["header"]["flags"] = NLM_F_REQUEST | (NLM_F_DUMP if dump else 0)
            message["header"]["sequence_number"] = sequence
            message.encode()
            try:
                sock = self._open()
                sock.send(message.data)
                return self._answers(sock, sequence, dump)
            except OSError:
                self._close()
                raise

    def _answers(self, sock: socket.socket, sequence: int, dump: bool) -> list[bytes]:
        found: list[bytes] = []
        while True:
            for kind, seq, message in messages_in(sock.recv(_RECEIVE)):
                if seq != sequence:
                    continue
                if kind == NLMSG_DONE:
                    return found
                if kind == NLMSG_ERROR:
                    code = _errno(message)
                    if code and code != errno.ENOENT:  # nothing there
                        raise NetlinkError(code, os.strerror(code))
                    return found
                found.append(message)
                if not dump:
                    return found
