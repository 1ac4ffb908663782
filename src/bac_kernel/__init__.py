"""Bac's in-sandbox code interpreter: Jupyter kernels behind E2B's `/execute` protocol.

Run it as `python3 -m bac_kernel --port 49999 [--ready-fd N]`. Contexts are kernels
(Python, Bash, JavaScript, TypeScript, R, Java); `POST /execute` streams a cell's output as
NDJSON. Errors are drawn in `bac_kernel._errors`.

Exports resolve lazily: every Python kernel imports `bac_kernel.inkernel`, and must not
pay for the server's web stack on the way.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bac_kernel._app import create_app
    from bac_kernel._contexts import ContextRegistry
    from bac_kernel._envd import EnvdClient
    from bac_kernel._errors import (
        BadRequestError,
        ContextNotFoundError,
        KernelDiedError,
        KernelError,
        KernelServerError,
        UnknownLanguageError,
    )
    from bac_kernel._languages import LANGUAGES

_EXPORTS = {
    "create_app": "bac_kernel._app",
    "ContextRegistry": "bac_kernel._contexts",
    "EnvdClient": "bac_kernel._envd",
    "BadRequestError": "bac_kernel._errors",
    "ContextNotFoundError": "bac_kernel._errors",
    "KernelDiedError": "bac_kernel._errors",
    "KernelError": "bac_kernel._errors",
    "KernelServerError": "bac_kernel._errors",
    "UnknownLanguageError": "bac_kernel._errors",
    "LANGUAGES": "bac_kernel._languages",
}

__all__ = [
    "LANGUAGES",
    "BadRequestError",
    "ContextNotFoundError",
    "ContextRegistry",
    "EnvdClient",
    "KernelDiedError",
    "KernelError",
    "KernelServerError",
    "UnknownLanguageError",
    "create_app",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bac_kernel' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
