"""Bac's in-sandbox code interpreter: Jupyter kernels behind E2B's `/execute` protocol.

Run it as `python3 -m bac_kernel --port 49999 [--ready-fd N]`. Contexts are kernels
(Python, Bash, JavaScript, TypeScript, R); `POST /execute` streams a cell's output as
NDJSON. Errors are drawn in `bac_kernel._errors`.
"""

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
