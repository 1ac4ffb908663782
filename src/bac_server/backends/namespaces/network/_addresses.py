"""Point-to-point address pairs for sandboxes, leased through files so leases survive restarts.

Slot ``n`` of the pool ``10.202.0.0/16`` gives the host side ``10.202.0.0 + 2n`` and the
sandbox ``+ 2n + 1`` (both /32 with each other as peer), and the host veth ``<prefix><n>``.
A /16 holds 32768 sandboxes. A lease is the file ``<dir>/<n>`` created with ``O_EXCL``
holding the slot directory and the owning server; the directory is host-wide (addresses and
interface names are), so servers with different data directories never collide.

Each pool starts leasing at a random slot and goes round from there: an address freed by
an earlier server (or an earlier pool of this process) is not the next one handed out,
so a client's pooled keep-alive connection to a sandbox that is gone, or a stale
neighbour or conntrack entry, does not meet a new sandbox at the same address.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path

from bac_server.backends.base import ResourceLimitError


@dataclass(frozen=True)
class Lease:
    index: int
    host_address: str
    sandbox_address: str
    veth: str


@dataclass(frozen=True)
class LeaseOwner:
    slot_dir: str
    server: str


class AddressPool:
    def __init__(self, cidr: str, lease_dir: Path, veth_prefix: str) -> None:
        self.network = ipaddress.IPv4Network(cidr, strict=True)
        if self.network.prefixlen > 30:
            raise ValueError(f"address pool {cidr} is too small")
        self.capacity = self.network.num_addresses // 2
        if len(veth_prefix) + len(str(self.capacity - 1)) > 15:
            raise ValueError("veth prefix too long for interface names (15 bytes max)")
        self.lease_dir = lease_dir
        self.veth_prefix = veth_prefix
        self._cursor = itertools.count(secrets.randbelow(self.capacity))
        self._lock = threading.Lock()

    def describe(self, index: int) -> Lease:
        base = int(self.network.network_address) + 2 * index
        return Lease(index=index, host_address=str(ipaddress.IPv4Address(base)),
                     sandbox_address=str(ipaddress.IPv4Address(base + 1)),
                     veth=f"{self.veth_prefix}{index}")

    def lease(self, owner: LeaseOwner) -> Lease:
        """Take a free slot for ``owner``; raises ResourceLimitError when the pool is full."""
        self.lease_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with self._lock:
            start = next(self._cursor) % self.capacity
        # Round-robin from a moving cursor keeps a just-freed address (and any stale
        # neighbour or conntrack entry for it) out of use for as long as possible.
        for step in range(self.capacity):
            index = (start + step) % self.capacity
            try:
                fd = os.open(self.lease_dir / str(index),
                             os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            except FileExistsError:
                continue
            with os.fdopen(fd, "w") as handle:
                handle.write(f"{owner.slot_dir}\n{owner.server}\n")
            with self._lock:
                self._cursor = itertools.count(index + 1)
            return self.describe(index)
        raise ResourceLimitError(f"address pool {self.network} is exhausted "
                                 f"({self.capacity} sandboxes)")

    def owner(self, index: int) -> LeaseOwner | None:
        try:
            slot_dir, server = (self.lease_dir / str(index)).read_text().splitlines()[:2]
        except (FileNotFoundError, ValueError):
            return None
        return LeaseOwner(slot_dir, server)

    def transfer(self, index: int, slot_dir: str, to: LeaseOwner) -> bool:
        """Give ``slot_dir``'s lease of ``index`` to ``to`` (a file renamed over it, so it
        names one owner or the other at every instant); False, nothing changed, when it
        is not ``slot_dir``'s."""
        owner = self.owner(index)
        if owner is None or owner.slot_dir != slot_dir:
            return False
        temporary = self.lease_dir / f".{index}.{os.getpid()}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(f"{to.slot_dir}\n{to.server}\n")
        os.replace(temporary, self.lease_dir / str(index))
        return True

    def release(self, index: int, slot_dir: str) -> None:
        """Give the address back, only if ``slot_dir`` still holds it."""
        owner = self.owner(index)
        if owner is not None and owner.slot_dir == slot_dir:
            (self.lease_dir / str(index)).unlink(missing_ok=True)

    def indexes(self) -> list[int]:
        if not self.lease_dir.is_dir():
            return []
        return [int(e.name) for e in self.lease_dir.iterdir() if e.name.isdigit()]

    def index_of(self, veth: str) -> int | None:
        tail = veth[len(self.veth_prefix):]
        return int(tail) if veth.startswith(self.veth_prefix) and tail.isdigit() else None
