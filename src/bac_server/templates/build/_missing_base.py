"""A FROM that names nothing a build can start from, said so, with what it may have meant.

``FROM nosuchbase`` is sent as an image when no template has that name (the SDK decides
so; E2B's own Dockerfile conversion always does). A registry without such an image, one
refusing it, or one out of reach, should not then answer in a registry's words: a
reference that could be a template's name (``name`` or ``name:tag``: no registry host,
path or digest) fails as ``no template or image named 'nosuchbase'``, with the template
names closest to it. When the registry could not be reached that holds for a bare
``name`` only: ``python:3.12`` reads as an image, and keeps the registry's error, which
names the registry tried and ``BAC_REGISTRY_MIRROR`` (``images._materialize``).
A template asked for by name (``fromTemplate``) that does not exist fails as ``no
template named ...``, with the same suggestions.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Awaitable, Callable, Sequence

from .._errors import BaseNotFoundError
from ..images import ImageError, ImageErrorKind

TemplateNames = Callable[[], Awaitable[Sequence[str]]]
_TEMPLATE_LIKE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(?::\w[\w.-]*)?")
_IMAGE_SCHEMES = frozenset({"debian", "oci", "oci-archive", "docker-archive"})
_MAX_SUGGESTIONS = 3


def could_be_template(ref: str) -> bool:
    """Whether ``ref`` has a template name's shape (``name`` or ``name:tag``)."""
    return (_TEMPLATE_LIKE.fullmatch(ref) is not None
            and ref.partition(":")[0] not in _IMAGE_SCHEMES and ref != "scratch")


def suggestions(ref: str, names: Sequence[str]) -> list[str]:
    """The names closest to ``ref``'s (a typo's fix, or a name it contains: ``base`` for
    ``nosuchbase``), closest first."""
    wanted = ref.partition(":")[0].lower()
    known = {name.lower(): name for name in names if name and name.lower() != wanted}
    close = difflib.get_close_matches(wanted, list(known), n=_MAX_SUGGESTIONS, cutoff=0.6)
    close += sorted((name for name in known if len(name) >= 3
                     and (name in wanted or wanted in name)), key=len, reverse=True)
    return [known[name] for name in dict.fromkeys(close)][:_MAX_SUGGESTIONS]


async def _hint(ref: str, names: TemplateNames | None) -> str:
    close = suggestions(ref, await names()) if names is not None else []
    return f" (did you mean {' or '.join(repr(n) for n in close)}?)" if close else ""


async def no_template(ref: str, names: TemplateNames | None) -> BaseNotFoundError:
    """``fromTemplate`` named no template the building team can see."""
    return BaseNotFoundError(f"no template named {ref!r}{await _hint(ref, names)}")


async def no_image(ref: str, error: ImageError, names: TemplateNames | None, *,
                   anonymous: bool) -> BaseNotFoundError | None:
    """The error for an image import that failed as ``error``, when ``ref`` may have meant
    a template instead; None when the image's own error says it best."""
    if not could_be_template(ref):
        return None
    missing = error.kind is ImageErrorKind.NOT_FOUND or (
        # Docker Hub answers "access denied" for a repository that does not exist.
        error.kind is ImageErrorKind.UNAUTHORIZED and anonymous)
    if missing:
        return BaseNotFoundError(f"no template or image named {ref!r}"
                                 f"{await _hint(ref, names)}")
    if error.kind is ImageErrorKind.UNREACHABLE and ":" not in ref:
        where = error.registry or "the registry"
        return BaseNotFoundError(f"no template or image named {ref!r}"
                                 f"{await _hint(ref, names)}; {where} could not be reached "
                                 "to look for an image")
    return None
