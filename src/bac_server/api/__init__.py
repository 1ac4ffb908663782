"""The E2B-compatible REST API (transport only: parse, call the control plane, map errors).

One module per resource (``sandboxes``, ``network``, ``checkpoints``, ``health``, the
``templates`` subpackage), every route in the one table of ``routes``, and the transport
pieces they share (``context``, ``body``, ``query``, ``errors``, ``views``).
"""

from bac_server.api.context import ApiSettings
from bac_server.api.routes import ROUTES, build_api

__all__ = ["ROUTES", "ApiSettings", "build_api"]
