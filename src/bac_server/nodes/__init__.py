"""More than one machine (docs/scale-out.md): node agents and the API replicas' view of
them.

``NodeAgent`` serves one machine's backend to the replicas (``bac node``); ``NodeFleet`` is
the backend a replica drives (``bac serve --role api``): each sandbox placed on a node,
every call sent to its node, traffic through the node's tunnel.
"""

from ._agent import NodeAgent, NodeIdentity
from ._fleet import NodeFleet
from ._placement import spread
from ._tunnel import TunnelError, TunnelServer, dial_tunnel

__all__ = ["NodeAgent", "NodeFleet", "NodeIdentity", "TunnelError",
           "TunnelServer", "dial_tunnel", "spread"]
