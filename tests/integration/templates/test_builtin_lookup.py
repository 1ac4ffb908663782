"""The template store's lookup of the built-in templates, on directories laid out as their
builds leave them (no build runs)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bac_server.backends.base import TemplateNotFound
from bac_server.templates import TemplateStore
from bac_server.templates.builtin import METADATA_FILE, find_layer, layer_digest


def _build(root: Path, name: str, digest: str, id_base: int, mtime: float) -> Path:
    build = root / "templates" / name / digest
    (build / "rootfs").mkdir(parents=True)
    (build / METADATA_FILE).write_text(json.dumps({"recipe": {"id_base": id_base}}))
    os.utime(build / METADATA_FILE, (mtime, mtime))
    return build


@pytest.mark.parametrize("ref", ["base", "code-interpreter", "code-interpreter-v1",
                                 "base-full"])
async def test_builtin_is_its_current_build_else_its_newest_older_one(tmp_path: Path,
                                                                     ref: str) -> None:
    """A built-in is the build of its current recipe; after a recipe change, until it is
    rebuilt, the newest older build for the same id range (never another range's); with
    neither it is not built."""
    store = TemplateStore(tmp_path)
    layer = find_layer(ref)
    name = "base" if layer is None else layer.name
    current = (store.base_recipe.digest() if layer is None else
               layer_digest(layer, store.base_recipe.digest(), store.id_range.base))
    how = "setup" if layer is None else f"prepare --template {name}"
    with pytest.raises(TemplateNotFound, match=f"not built yet.*{how}"):
        await store.get(ref)
    _build(tmp_path, name, "older", store.id_range.base, 1_000)
    newer = _build(tmp_path, name, "newer", store.id_range.base, 2_000)
    _build(tmp_path, name, "other-range", store.id_range.base + 65_536, 3_000)
    found = await store.get(ref)
    assert (found.template_id, found.rootfs) == (name, newer / "rootfs")
    built = _build(tmp_path, name, current, store.id_range.base, 0)
    assert (await store.get(ref)).rootfs == built / "rootfs"
