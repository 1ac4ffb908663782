"""envd: Bac's in-sandbox daemon, speaking E2B's envd protocol (Connect RPC + plain HTTP).

Run as ``python3 -m bac_envd --port 49983 [--host 0.0.0.0] [--ready-fd N] [--preload]``
inside every sandbox. It imports only ``bac_protocol`` of Bac's packages; everything that
is not needed to accept connections is imported lazily so start-up stays short.

Error tree (envd-internal, mapped to Connect codes / HTTP statuses at the transport)::

    EnvdError
    ├── InvalidPath       a path that cannot be resolved (NUL byte, ``~other``)
    ├── UnknownUser       the selected user does not exist in the sandbox
    └── InitError         a malformed ``/init`` body
"""

from bac_envd._errors import EnvdError, InitError, InvalidPath, UnknownUser

ENVD_VERSION = "0.6.13"
DEFAULT_PORT = 49983
# The oom_score_adj of every process envd starts (commands, the template's service):
# the most a score can be raised, so the kernel's OOM killer picks any of them before
# envd, whose score stays at the floor the sandbox inherits (docs/security.md).
CHILD_OOM_SCORE_ADJ = 1000

__all__ = [
    "CHILD_OOM_SCORE_ADJ",
    "DEFAULT_PORT",
    "ENVD_VERSION",
    "EnvdError",
    "InitError",
    "InvalidPath",
    "UnknownUser",
]
