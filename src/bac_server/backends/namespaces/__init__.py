"""The namespace backend: each sandbox an OCI container (crun by default) in its own user,
pid, mount, ipc, uts, cgroup and network namespaces, on an overlay of its template.

Public API::

    backend = NamespaceBackend(NamespaceConfig(data_dir=..., pool_size=4))
    await backend.prepare(template)            # optional: build envd bundle, warm the pool
    endpoint = await backend.create(spec)      # envd answering at endpoint.address:49983
    await backend.destroy(spec.sandbox_id)
"""

from ._backend import NamespaceBackend
from ._config import NamespaceConfig
from .checkpoint import choose_runtime
from .envd import EnvdBundleError, ensure_envd_bundle

__all__ = [
    "EnvdBundleError",
    "NamespaceBackend",
    "NamespaceConfig",
    "choose_runtime",
    "ensure_envd_bundle",
]
