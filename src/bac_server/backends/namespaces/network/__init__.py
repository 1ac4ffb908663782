"""The sandboxes' network, host side: each sandbox's address, namespace, egress and holds.

* ``_addresses``: /32 address pairs and veth names, leased host-wide through files.
* ``_netns``: a sandbox's network namespace and veth pair, made over netlink;
  ``_netns_stock``: some made ahead while the server is quiet, taken by new slots.
* ``_egress``: ``Egress``, each sandbox's policy in ``table inet bac`` (``nft``), its
  resolver (``_dns``, ``_dns_answers``), the relay that checks the host name a connection
  opens with and each HTTP request names (``_proxy``, ``_opening``, ``_http_relay``),
  what both decide and the answered addresses they pin (``_name_checks``), and the
  counters read back (``_usage``); for hosts with E2B network rules, each request made
  ready (``_transforms``: headers, secrets) and TLS terminated with the sandbox's own
  CA (``_relay_ca``).
* ``nft``: the table changed one sandbox at a time, each change one raw netlink batch.
* ``_tcp_hold``: a suspended sandbox's TCP connections held on the host (``tcp_hold``).
"""

from . import _tcp_hold as tcp_hold
from ._addresses import AddressPool, Lease, LeaseOwner
from ._egress import Egress
from ._netns import create_netns, delete_veth, host_links_with_prefix
from ._netns_stock import NetnsStock
from ._usage import link_traffic

__all__ = [
    "AddressPool",
    "Egress",
    "Lease",
    "LeaseOwner",
    "NetnsStock",
    "create_netns",
    "delete_veth",
    "host_links_with_prefix",
    "link_traffic",
    "tcp_hold",
]
