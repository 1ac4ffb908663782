"""envd from the host's side: its bundle (code and dependencies mounted read-only at
/opt/bac, built once per template Python and shared across data dirs) and the readiness
pipe a started sandbox reports on. The HTTP calls (``/health``, ``/init``) are in
``bac_server.backends.envd_http``, shared with the control plane."""

from ._bundle import EnvdBundleError, Progress, ensure_envd_bundle, template_python
from ._ready import wait_ready

__all__ = ["EnvdBundleError", "Progress", "ensure_envd_bundle", "template_python", "wait_ready"]
