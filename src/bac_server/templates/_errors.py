"""Template errors.

Error tree (server side, template layer)::

    TemplateError
    └── TemplateBuildError     building a template failed (the message says which step)

A template that is unknown or not built yet is ``backends.base.TemplateNotFound``.
"""

from __future__ import annotations


class TemplateError(Exception):
    """Base class of template failures."""


class TemplateBuildError(TemplateError):
    """Building a template failed; no partial build is ever used."""
