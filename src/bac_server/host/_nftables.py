"""Bac's own nftables table: sandboxes reach nothing, only answers to the host come back.

Every sandbox's host-side veth is named ``<prefix><n>``. The table is replaced as a whole
in one nft transaction, so applying it twice is harmless and there is never a moment with
half a rule set. Rules in other tables cannot undo a drop here: in nftables a packet must
pass every base chain on a hook, so an ``accept`` elsewhere does not override ours.
"""

from __future__ import annotations

import shutil
import subprocess

from ._errors import HostChangeFailed, MissingDependency

TABLE_FAMILY = "inet"
TABLE_NAME = "bac"

# reject (not drop) so a blocked connect fails at once instead of hanging until a timeout.
_RULESET = """\
table {family} {name}
delete table {family} {name}
table {family} {name} {{
    chain prerouting {{
        type filter hook prerouting priority raw; policy accept;
        # a sandbox may only send from its own address (anti-spoofing, reverse path)
        iifname "{prefix}*" fib saddr . iif oif missing drop
    }}
    chain input {{
        type filter hook input priority filter - 10; policy accept;
        iifname "{prefix}*" ct state established,related accept
        iifname "{prefix}*" reject with icmpx type admin-prohibited
    }}
    chain forward {{
        type filter hook forward priority filter - 10; policy accept;
        iifname "{prefix}*" reject with icmpx type admin-prohibited
        oifname "{prefix}*" ct state established,related accept
        oifname "{prefix}*" drop
    }}
}}
"""


def render_ruleset(veth_prefix: str) -> str:
    if not veth_prefix.isalnum() or len(veth_prefix) > 6:
        raise ValueError(f"veth prefix must be 1-6 alphanumerics, got {veth_prefix!r}")
    return _RULESET.format(family=TABLE_FAMILY, name=TABLE_NAME, prefix=veth_prefix)


def ensure_table(veth_prefix: str) -> None:
    """Install (or atomically replace) the ``inet bac`` table."""
    nft = shutil.which("nft")
    if nft is None:
        raise MissingDependency("nft is not installed (apt-get install nftables)")
    # SECURITY: the only host firewall change Bac makes; it lives in its own table and
    # only matches interfaces named with Bac's veth prefix.
    done = subprocess.run(
        [nft, "-f", "-"], input=render_ruleset(veth_prefix), capture_output=True, text=True,
        check=False,
    )
    if done.returncode != 0:
        raise HostChangeFailed(f"nft could not install table {TABLE_FAMILY} {TABLE_NAME}: "
                               f"{done.stderr.strip()}")


def table_present() -> bool:
    nft = shutil.which("nft")
    if nft is None:
        return False
    done = subprocess.run([nft, "list", "table", TABLE_FAMILY, TABLE_NAME],
                          capture_output=True, check=False)
    return done.returncode == 0
