"""Bac's host table (``inet bac``) changed one sandbox at a time over raw netlink.

* ``_socket``: ``NftSocket``, one atomic, acknowledged batch per change; single reads.
* ``_messages``: the nf_tables messages of those changes (pyroute2's message classes).
* ``_elements``: set elements as nf_tables keys them; ranges made disjoint.
* ``_sandbox``: ``SandboxRules``, one sandbox's elements and objects and their batches.
* ``_installed``: what each veth holds, kept by the batches and listed at start-up.
* ``_set_elements``: one address in an ``ipv4_addr`` set (the TCP holds' ``held``).
"""

from ._elements import Element
from ._installed import Contents, Installed, VethOf, read_installed
from ._messages import counter_bytes, decoded_elements, get_counter, list_elements
from ._sandbox import (
    LOG_SIZE,
    LOG_TIMEOUT_MS,
    PinError,
    SandboxNames,
    SandboxRules,
    pin_elements,
    policy_elements,
)
from ._set_elements import LoopSetElements, SetElements
from ._socket import NftSocket

__all__ = [
    "LOG_SIZE",
    "LOG_TIMEOUT_MS",
    "Contents",
    "Element",
    "Installed",
    "LoopSetElements",
    "NftSocket",
    "PinError",
    "SandboxNames",
    "SandboxRules",
    "SetElements",
    "VethOf",
    "counter_bytes",
    "decoded_elements",
    "get_counter",
    "list_elements",
    "pin_elements",
    "policy_elements",
    "read_installed",
]
