"""The TCP ports a sandbox listens on, read from the host: its network namespace's
``/proc/<pid>/net/tcp`` and ``tcp6`` through any of its processes (two small reads, no
entry into the namespace).

Only ports another machine could reach count (what the gateway can relay to): a listener
on a loopback address is the sandbox's own business, and envd's port is Bac's.
"""

from __future__ import annotations

from pathlib import Path

from bac_server.backends.base import ENVD_PORT

_LISTEN = "0A"
# Loopback in /proc/net/tcp's hex: 127.x.x.x (host order in the file: last byte 7F) and
# ::1 (four 32-bit words, the last host-order 1).
_LOOPBACK6 = "00000000000000000000000001000000"


def _is_loopback(address: str) -> bool:
    if len(address) == 8:
        return address.endswith("7F")
    return address == _LOOPBACK6


def listening_ports(pid: int) -> tuple[int, ...]:
    """Ports listened on by any address but loopback in ``pid``'s network namespace,
    sorted; () when the process is gone."""
    found: set[int] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 4 or fields[3] != _LISTEN:
                continue
            address, _, port = fields[1].partition(":")
            if not _is_loopback(address):
                found.add(int(port, 16))
    found.discard(ENVD_PORT)
    return tuple(sorted(found))
