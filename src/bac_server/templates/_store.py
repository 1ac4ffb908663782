"""The template store: finds built templates and builds ``base`` when it is missing.

Layout under ``<data_dir>/templates`` (0700: the shifted trees hold setuid binaries owned
by the sandbox id range, which no host user should be able to run)::

    .lock                    serialises builds across processes
    base/<digest>/template.json, rootfs/
    code-interpreter/<digest>/...     a layer on base (digest covers base's digest too)
    manifests/<digest>.json  templates built from recipes (``BuildEngine``, ``built``)
    ../layers/<key>/         their layers, shared (``layers.LayerStore``)
    ../cache/{apt,pip,npm}   downloads kept for rebuilds of layers
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path

from bac_server.backends.base import TemplateImage, TemplateNotFound
from bac_server.host import IdRange, default_data_dir

from ._flock import locked
from .builtin import (
    BASE_ALIASES,
    METADATA_FILE,
    ProgressCallback,
    Recipe,
    base_recipe,
    build_layer,
    build_rootfs,
    find_layer,
    layer_digest,
)
from .images import RegistryAccess
from .layers import read_manifest, template_image

_log = logging.getLogger(__name__)


def _log_progress(line: str) -> None:
    _log.info("%s", line)


class TemplateStore:
    """Built templates under ``data_dir``. ``get`` never builds; ``ensure_base`` does."""

    def __init__(self, data_dir: Path | None = None, *, id_range: IdRange | None = None,
                 registries: RegistryAccess | None = None) -> None:
        self.data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
        self.id_range = id_range or IdRange()
        # The registries beyond the public internet a build's FROM may name.
        self.registries = registries or RegistryAccess()
        self.root = self.data_dir / "templates"
        self._build_lock = asyncio.Lock()

    @property
    def base_recipe(self) -> Recipe:
        return base_recipe(self.id_range.base)

    def _image(self, build_dir: Path, template_id: str = "base") -> TemplateImage:
        # The built-ins (`base`, and `code-interpreter` on it) opt in to setuid: their `user`
        # has passwordless sudo, as E2B's do and the SDKs' tests rely on; docs/security.md,
        # "The setuid trade-off".
        layer = find_layer(template_id)
        return TemplateImage(template_id=template_id, rootfs=build_dir / "rootfs",
                             default_user="user", default_workdir="/home/user",
                             allow_setuid=True, warm_up=None if layer is None else layer.warm_up)

    def _complete_builds(self, name: str) -> list[Path]:
        parent = self.root / name
        if not parent.is_dir():
            return []
        builds = [d for d in parent.iterdir()
                  if not d.name.startswith(".") and (d / METADATA_FILE).is_file()]
        return sorted(builds, key=lambda d: (d / METADATA_FILE).stat().st_mtime)

    def _matching_id_range(self, build: Path) -> bool:
        meta = json.loads((build / METADATA_FILE).read_text())
        return int(meta["recipe"]["id_base"]) == self.id_range.base

    def _build_of(self, name: str, digest: str) -> TemplateImage | None:
        """The build ``digest`` of the built-in ``name``, else its newest older build."""
        current = self.root / name / digest
        if (current / METADATA_FILE).is_file():
            return self._image(current, name)
        # An older recipe's build still works (same id range); prefer it to failing.
        older = [b for b in self._complete_builds(name) if self._matching_id_range(b)]
        if not older:
            return None
        _log.warning("template %s: recipe changed, using the previous build %s until "
                     "it is rebuilt (bac setup)", name, older[-1].name)
        return self._image(older[-1], name)

    async def get(self, template_id_or_alias: str) -> TemplateImage:
        """The built template; raises ``TemplateNotFound`` when unknown or not built."""
        layer = find_layer(template_id_or_alias)
        if layer is not None:
            digest = layer_digest(layer, self.base_recipe.digest(), self.id_range.base)
            found = self._build_of(layer.name, digest)
            if found is None:
                raise TemplateNotFound(
                    f"template '{layer.name}' is not built yet; build it with "
                    f"python -m bac_server.prepare --template {layer.name}")
            return found
        if template_id_or_alias not in BASE_ALIASES:
            raise TemplateNotFound(f"template '{template_id_or_alias}' not found")
        found = self._build_of("base", self.base_recipe.digest())
        if found is None:
            raise TemplateNotFound("template 'base' is not built yet; run scripts/setup "
                                   "(or TemplateStore.ensure_base)")
        return found

    async def built(self, digest: str, template_id: str) -> TemplateImage:
        """A template built by ``BuildEngine``, by its digest; raises ``TemplateNotFound``
        when its manifest or any of its layers is gone."""
        def load() -> TemplateImage:
            return template_image(read_manifest(digest, self.data_dir), template_id)
        return await asyncio.to_thread(load)

    async def ensure_base(self, progress: ProgressCallback | None = None) -> TemplateImage:
        """Build ``base`` unless a build of the current recipe exists. Idempotent."""
        report = progress or _log_progress
        recipe = self.base_recipe
        target = self.root / "base" / recipe.digest()
        async with self._build_lock:
            if (target / METADATA_FILE).is_file():
                return self._image(target)
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(self.root, 0o700)
            async with locked(self.root / ".lock"):
                # Another process may have built it while this one waited.
                if not (target / METADATA_FILE).is_file():
                    (self.root / "base").mkdir(mode=0o700, exist_ok=True)
                    await build_rootfs(recipe, self.root / "base", report, self.id_range.size)
        return self._image(target)

    async def ensure(self, template_id_or_alias: str,
                     progress: ProgressCallback | None = None) -> TemplateImage:
        """Build the template (and what it derives from) unless built. Idempotent."""
        recipe = find_layer(template_id_or_alias)
        if recipe is None:
            if template_id_or_alias in BASE_ALIASES:
                return await self.ensure_base(progress)
            raise TemplateNotFound(f"template '{template_id_or_alias}' not found")
        report = progress or _log_progress
        base = await self.ensure_base(report)
        digest = layer_digest(recipe, base.rootfs.parent.name, self.id_range.base)
        target = self.root / recipe.name / digest
        async with self._build_lock:
            if (target / METADATA_FILE).is_file():
                return self._image(target, recipe.name)
            async with locked(self.root / ".lock"):
                if not (target / METADATA_FILE).is_file():
                    (self.root / recipe.name).mkdir(mode=0o700, exist_ok=True)
                    await build_layer(recipe, digest, base.rootfs, self.root / recipe.name,
                                      cache_root=self.data_dir / "cache",
                                      id_base=self.id_range.base, id_size=self.id_range.size,
                                      progress=report)
        return self._image(target, recipe.name)
