"""Template errors.

Error tree (server side, template layer)::

    TemplateError
    ├── TemplateBuildError     building a template failed (the log entry says which step)
    │   ├── StepFailed         a RUN (or USER/finalize) command exited non-zero: what ran
    │   │                      and its exit code (the output is in the log)
    │   ├── BaseNotFoundError  FROM names no template or image the build can start from:
    │   │                      the names it may have meant
    │   └── DiskFullError      the disk holding the data directory is full
    ├── ImageError             a FROM image could not be imported (``images``)
    └── CollectionRefused      what must stay cannot be known (``gc``)

A template that is unknown or not built yet is ``backends.base.TemplateNotFound``.
"""

from __future__ import annotations


class TemplateError(Exception):
    """Base class of template failures."""


class TemplateBuildError(TemplateError):
    """Building a template failed; no partial build is ever used."""


class StepFailed(TemplateBuildError):
    """A step's command exited non-zero (the message has what ran and its exit code)."""


class BaseNotFoundError(TemplateBuildError):
    """FROM names neither a template nor an image this build can start from."""


class DiskFullError(TemplateBuildError):
    """The disk holding the data directory filled up during the build."""
