"""Errors of the kernel server, one tree for its HTTP clients.

    KernelServerError                 base; never raised itself
    ├── BadRequestError               400: malformed body, both language and context, bad cwd
    │   └── UnknownLanguageError      400: a language no kernel speaks (or none installed)
    ├── ContextNotFoundError          404: no context with that id
    └── KernelError                   500: a kernel could not be started or talked to
        └── KernelDiedError           the kernel process exited while in use

Each class carries the HTTP status its handler answers with; the message is the body.
"""

from __future__ import annotations


class KernelServerError(Exception):
    """Base of every error the kernel server reports to a client."""

    status_code = 500


class BadRequestError(KernelServerError):
    """The request cannot be served as written."""

    status_code = 400


class UnknownLanguageError(BadRequestError):
    """No kernel for this language exists, or its runtime is not installed here."""


class ContextNotFoundError(KernelServerError):
    """The context id names no live context."""

    status_code = 404


class KernelError(KernelServerError):
    """A kernel could not be started, or stopped answering."""

    status_code = 500


class KernelDiedError(KernelError):
    """The kernel process exited while it was starting or running code."""
