"""The TCP ports a sandbox listens on, asked of the kernel's socket diagnostics
(``NETLINK_SOCK_DIAG``) inside the sandbox's network namespace, for listening sockets only.

Not ``/proc/<pid>/net/tcp``: reading that walks the kernel's whole table of established
connections, every namespace's, whatever the reader's namespace, so its cost grew with the
fleet (7 ms a read here, two reads a sandbox: 75 % of the server's CPU sampling 300 idle
sandboxes). A dump of listening sockets alone walks only the listeners' table. The request
and the two fields read from each answer are a few ``struct`` calls: a general netlink
library's message objects cost more than the kernel's work here.

A netlink socket belongs to the namespace it was made in, so it is made in a thread that
entered the sandbox's namespace: one dedicated thread, which does nothing else, enters the
namespace of each sandbox before each read (never reading where the previous one left it:
a namespace it cannot enter is no answer), and never does host work.

Only ports another machine could reach count (what the gateway can relay to): a listener
on a loopback address is the sandbox's own business, and envd's port is Bac's.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
from concurrent.futures import ThreadPoolExecutor

from bac_server.backends.base import ENVD_PORT
from bac_server.host._syscalls import CLONE_NEWNET, setns

from ._process import is_alive

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 0x1
_NLM_F_DUMP = 0x300
_NLMSG_ERROR = 2
_NLMSG_DONE = 3
_TCP_LISTEN = 10
_HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, seq, pid
# inet_diag_req_v2: family, protocol, extensions, pad, states; then a zeroed socket id.
_REQUEST = struct.Struct("=BBBxI48x")
_SOCKID_SPORT = 4  # in inet_diag_msg: family, state, timer, retrans, then the socket id
_SOCKID_SRC = 8

# SECURITY: the only thread that enters sandboxes' namespaces; it runs nothing but
# _listeners_in, which enters its target before anything else.
_IN_SANDBOX = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bac-sandbox-ports")


def _request(family: int) -> bytes:
    body = _REQUEST.pack(family, socket.IPPROTO_TCP, 0, 1 << _TCP_LISTEN)
    return _HEADER.pack(_HEADER.size + len(body), _SOCK_DIAG_BY_FAMILY,
                        _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0) + body


def _dump(sock: socket.socket, family: int) -> list[tuple[bytes, int]]:
    """(address, port) of each listening socket of ``family`` in the socket's namespace."""
    sock.send(_request(family))
    found: list[tuple[bytes, int]] = []
    size = 4 if family == socket.AF_INET else 16
    while True:
        data = sock.recv(65536)
        if not data:
            raise OSError("socket diagnostics: the answer ended early")
        offset = 0
        while offset + _HEADER.size <= len(data):
            length, kind = struct.unpack_from("=IH", data, offset)
            if kind == _NLMSG_DONE:
                return found
            if kind == _NLMSG_ERROR:
                code = -struct.unpack_from("=i", data, offset + _HEADER.size)[0]
                raise OSError(code, f"socket diagnostics: {os.strerror(code)}")
            if kind == _SOCK_DIAG_BY_FAMILY:
                body = offset + _HEADER.size
                port = struct.unpack_from("!H", data, body + _SOCKID_SPORT)[0]
                found.append((data[body + _SOCKID_SRC:body + _SOCKID_SRC + size], port))
            offset += (length + 3) & ~3
            if length < _HEADER.size:
                raise OSError("socket diagnostics: a malformed answer")


def _reachable(address: bytes) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_loopback


def _listeners_in(pid: int, started: int | None) -> tuple[int, ...]:
    try:
        target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return ()
    try:
        # With its namespace held, the pid must still be the sandbox's init (not reused).
        if not is_alive(pid, started):
            return ()
        setns(target, CLONE_NEWNET)
    except OSError:
        return ()
    finally:
        os.close(target)
    found: set[int] = set()
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC,
                       _NETLINK_SOCK_DIAG) as sock:
        for family in (socket.AF_INET, socket.AF_INET6):
            found.update(port for address, port in _dump(sock, family) if _reachable(address))
    found.discard(ENVD_PORT)
    return tuple(sorted(found))


def listening_ports(pid: int, started: int | None = None) -> tuple[int, ...]:
    """Ports listened on by any address but loopback in the network namespace of ``pid``
    (started at ``started``, when known), sorted; () when the process is gone."""
    try:
        return _IN_SANDBOX.submit(_listeners_in, pid, started).result()
    except OSError:
        return ()
