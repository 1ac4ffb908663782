"""IPv4 forwarding, which sandbox egress needs, without turning the host into a router.

The first time Bac turns ``net.ipv4.ip_forward`` on it remembers (under /run, so until the
next boot, when the kernel resets it too) that the host forwarded nothing before; the
firewall table then keeps forwarding limited to traffic from and to sandboxes. The table
goes in first, forwarding second, so there is no moment without that guard.
"""

from __future__ import annotations

from pathlib import Path

from ._errors import HostChangeFailed
from ._nftables import ensure_table

_SYSCTL = Path("/proc/sys/net/ipv4/ip_forward")
_MARKER = Path("/run/bac/ip_forward.before")


def forwarding_was_off(marker: Path = _MARKER) -> bool:
    """True when the host did not forward before Bac first turned forwarding on."""
    if not marker.exists():
        marker.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        marker.write_text(_SYSCTL.read_text().strip() + "\n")
    return marker.read_text().strip() != "1"


def enable_forwarding() -> None:
    if _SYSCTL.read_text().strip() == "1":
        return
    try:
        # SECURITY: what is forwarded is limited by table inet bac (see _nftables).
        _SYSCTL.write_text("1\n")
    except OSError as exc:
        raise HostChangeFailed(f"could not enable net.ipv4.ip_forward: {exc}") from exc


def ensure_firewall(veth_prefix: str) -> None:
    """The table first, forwarding second (see the module docstring)."""
    ensure_table(veth_prefix, guard_forwarding=forwarding_was_off())
    enable_forwarding()
