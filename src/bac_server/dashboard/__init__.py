"""Mission Control: the web dashboard ``bac serve`` serves under ``/ui/`` on its own port.

Server-rendered pages (Jinja2) made live with htmx and a few scripts of its own, the
browser libraries installed from npm at set-up (``scripts/setup-ui.sh``) and served from
here. Transport only, as the API is: each page or action finds the viewer (``_guard``),
scopes what it asks to the viewer's team (``_scope``), and calls the control plane.

* ``_routes``: the dashboard as one application, every page in one table; the front door
  (``/``: a browser goes to ``/ui/``, an API client keeps its JSON 404).
* ``_context``: settings, the plane, the sessions and the renderer on the app's state.
* ``_sessions``: server-side sessions; ``_guard``: sign-in required, CSRF, the security
  headers, error pages; ``_signin``: sign-in and sign-out; ``_scope``: team scoping.
"""

from ._context import DashboardSettings
from ._routes import build_dashboard, front_routes

__all__ = ["DashboardSettings", "build_dashboard", "front_routes"]
