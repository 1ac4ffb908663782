"""Where a build starts: the layers of its FROM, the state its first step runs in, the key
every layer of the build chains from.

* ``FromTemplate("base")`` and ``FromImage("e2bdev/base[:tag]")`` (what E2B's SDK sends for
  ``from_base_image()``) are the built-in ``base`` template (built here if missing);
* another ``FromTemplate`` is resolved by the caller (names and tags are the API
  layer's); steps start as its default user, in its working directory, with its env;
* a ``FromImage`` is imported (Debian suite, OCI layout or archive, registry) into one
  whole rootfs; steps start as the image's USER (root when unset), in its WORKDIR, with
  its ENV, as in Docker.

A FROM that names nothing fails as ``BaseNotFoundError`` with the template names it may
have meant (``_missing_base``).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from bac_server.backends.base import TemplateImage, TemplateNotFound

from .._steps import FromImage, FromTemplate
from .._store import TemplateStore
from ..builtin import BASE_ALIASES, ProgressCallback
from ..images import ImageError, ImportedImage, materialize_image
from ..layers import digest
from ._missing_base import TemplateNames, no_image, no_template
from ._state import BuildState

# The template a FROM names; TemplateNotFound when the building team has none by that name.
ResolveTemplate = Callable[[str], Awaitable[TemplateImage]]
_E2B_BASE = re.compile(r"(?:(?:docker\.io|index\.docker\.io)/)?e2bdev/base(?::[\w.-]+)?")


@dataclass(frozen=True)
class Source:
    key: str  # what every layer key of the build chains from
    rootfs: Path
    layers: tuple[Path, ...]  # overlay diffs over ``rootfs``, bottom first
    state: BuildState
    from_image: bool  # an imported image: the default user may still have to be made
    description: str


def is_base(source: FromTemplate | FromImage) -> bool:
    if isinstance(source, FromTemplate):
        return source.ref in BASE_ALIASES
    return _E2B_BASE.fullmatch(source.ref) is not None


def _from_template(image: TemplateImage, description: str) -> Source:
    stack = [str(p) for p in image.layer_stack]
    state = BuildState(env=image.env, user=image.default_user,
                       home=image.default_workdir if image.default_user != "root" else "/root")
    return Source(key=digest("template", stack), rootfs=image.rootfs,
                  layers=tuple(reversed(image.lowers)), state=state, from_image=False,
                  description=description)


async def resolve_source(source: FromTemplate | FromImage, store: TemplateStore,
                         resolve_template: ResolveTemplate, progress: ProgressCallback,
                         names: TemplateNames | None = None) -> Source:
    """Where the build starts; ``names``: the templates it could start from, suggested
    when the FROM names none of them."""
    if is_base(source):
        image = await store.ensure_base(progress)
        return _from_template(image, "template base")
    if isinstance(source, FromTemplate):
        try:
            image = await resolve_template(source.ref)
        except TemplateNotFound as exc:
            raise await no_template(source.ref, names) from exc
        return _from_template(image, f"template {source.ref}")
    imported = await _import(source, store, progress, names)
    config = imported.config
    user = config.user or "root"
    state = BuildState(env=config.env, user=user, workdir=config.workdir,
                       home="/root" if user in ("root", "0") else "/")
    return Source(key=digest("image", imported.digest, store.id_range.base),
                  rootfs=imported.rootfs, layers=(), state=state, from_image=True,
                  description=f"image {source.ref} ({imported.digest})")


async def _import(source: FromImage, store: TemplateStore, progress: ProgressCallback,
                  names: TemplateNames | None) -> ImportedImage:
    try:
        return await materialize_image(source, data_dir=store.data_dir,
                                       id_range=store.id_range, progress=progress,
                                       registries=store.registries)
    except ImageError as exc:
        missing = await no_image(source.ref, exc, names, anonymous=source.username is None)
        if missing is None:
            raise
        raise missing from exc
