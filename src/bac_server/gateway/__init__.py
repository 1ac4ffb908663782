"""The gateway: every byte into a sandbox passes here, routed by header or host name."""

from bac_server.gateway.dispatch import Dispatcher, GatewaySlot
from bac_server.gateway.pool import Pool
from bac_server.gateway.proxy import Gateway, is_internal_path
from bac_server.gateway.routing import RoutingError, Target, from_host, target_of

__all__ = [
    "Dispatcher",
    "Gateway",
    "GatewaySlot",
    "Pool",
    "RoutingError",
    "Target",
    "from_host",
    "is_internal_path",
    "target_of",
]
