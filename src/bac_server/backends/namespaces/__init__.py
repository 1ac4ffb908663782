"""The namespace backend: each sandbox an OCI container (crun by default) in its own user,
pid, mount, ipc, uts, cgroup and network namespaces, on an overlay of its template.

Public API::

    backend = NamespaceBackend(NamespaceConfig(data_dir=..., pool_size=4))
    await backend.prepare(template)            # optional: build envd bundle, warm the pool
    endpoint = await backend.create(spec)      # envd answering at endpoint.address:49983
    await backend.destroy(spec.sandbox_id)

Inside, each part is built only on those after it (an import-linter contract):
``_backend`` (the class, which composes the rest) and ``_config``; ``pool/`` (slots made
ahead and the create that hands them out); ``checkpoint/`` (suspend and wake,
checkpoints, copies; CRIU in ``checkpoint/criu/``) and ``build/`` (template build steps);
``slots/`` (a sandbox's slot from start to teardown, the table of live ones, what the
runtime is given); ``network/`` and ``envd/``; ``layers/``.
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
