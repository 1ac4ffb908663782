"""Checkpoints on disk: one directory each, independent of the sandbox they came from.

::

    <data>/checkpoints/<id>/      0700 root
        meta.json                 what it is and what restoring it needs
        config.json               the source slot's OCI config (a copy's starting point)
        upper/                    the overlay's upper layer (the sandbox's files)
        images/                   CRIU images (processes, memory, sockets); memory only

A checkpoint is written under ``<id>.partial`` and renamed into place when complete, so
a crash never leaves a half checkpoint under a real id (recovery removes partial ones).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bac_server.backends.base import CheckpointInfo, CheckpointNotFound
from bac_server.host import remove_tree, write_private

from .._config import NamespaceConfig
from ..slots import disk_used
from .criu import Images

_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_PARTIAL = ".partial"


@dataclass(frozen=True)
class Meta:
    checkpoint_id: str
    sandbox_id: str
    created_at: float
    memory: bool
    size_bytes: int
    template_id: str
    template_rootfs: str
    envd_bundle: str
    # The template's layers, topmost first, rootfs last (empty in checkpoints taken
    # before layered templates: ``template_rootfs`` alone).
    layers: tuple[str, ...] = ()

    @property
    def lowers(self) -> tuple[Path, ...]:
        """The built layers above ``template_rootfs`` (``TemplateImage.lowers``)."""
        return tuple(Path(p) for p in self.layers[:-1])

    def info(self) -> CheckpointInfo:
        return CheckpointInfo(
            checkpoint_id=self.checkpoint_id, sandbox_id=self.sandbox_id,
            created_at=datetime.fromtimestamp(self.created_at, UTC),
            size_bytes=self.size_bytes, memory=self.memory)


def root(config: NamespaceConfig) -> Path:
    return config.checkpoints_dir


def check_id(checkpoint_id: str) -> None:
    if not _ID.match(checkpoint_id):
        raise CheckpointNotFound(f"invalid checkpoint id {checkpoint_id!r}")


@dataclass(frozen=True)
class Stored:
    """One checkpoint directory (final or still partial)."""

    path: Path

    @property
    def meta_file(self) -> Path:
        return self.path / "meta.json"

    @property
    def config(self) -> Path:
        return self.path / "config.json"

    @property
    def upper(self) -> Path:
        return self.path / "upper"

    @property
    def dump(self) -> Images:
        return Images(self.path / "images", self.path / "work")

    def meta(self) -> Meta:
        try:
            data = json.loads(self.meta_file.read_text())
        except FileNotFoundError as exc:
            raise CheckpointNotFound(f"checkpoint {self.path.name} not found") from exc
        known = {f.name for f in dataclasses.fields(Meta)}
        meta = Meta(**{k: v for k, v in data.items() if k in known})
        return dataclasses.replace(meta, layers=tuple(meta.layers))

    def oci_config(self) -> dict[str, Any]:
        data = json.loads(self.config.read_text())
        assert isinstance(data, dict)
        return data


def partial(config: NamespaceConfig, checkpoint_id: str) -> Stored:
    """A fresh directory to write a checkpoint into. Traversable by the sandboxes' root
    gid (restored tasks read their own images), listable by nobody but root."""
    check_id(checkpoint_id)
    gid = config.id_range.root
    base = root(config)
    base.mkdir(mode=0o710, parents=True, exist_ok=True)
    os.chown(base, 0, gid)
    if (base / checkpoint_id).exists():
        raise FileExistsError(f"checkpoint {checkpoint_id} already exists")
    path = base / (checkpoint_id + _PARTIAL)
    remove_tree(path)
    path.mkdir(mode=0o710)
    os.chown(path, 0, gid)
    (path / "upper").mkdir(mode=0o755)
    return Stored(path)


def finish(config: NamespaceConfig, work: Stored, meta: Meta) -> Meta:
    """Write the metadata (with the size) and publish the checkpoint under its id."""
    remove_tree(work.dump.work)  # CRIU's logs: not part of the checkpoint
    meta = dataclasses.replace(meta, size_bytes=disk_used(work.path))
    write_private(work.meta_file, json.dumps(dataclasses.asdict(meta)))
    os.replace(work.path, root(config) / meta.checkpoint_id)
    return meta


def find(config: NamespaceConfig, checkpoint_id: str) -> Stored:
    check_id(checkpoint_id)
    stored = Stored(root(config) / checkpoint_id)
    stored.meta()  # raises CheckpointNotFound
    return stored


def delete(config: NamespaceConfig, checkpoint_id: str) -> None:
    check_id(checkpoint_id)
    remove_tree(root(config) / checkpoint_id)


def sweep_partial(config: NamespaceConfig, max_age_s: float = 3600.0) -> None:
    """Remove checkpoints a crash left half-written."""
    base = root(config)
    for entry in base.iterdir() if base.is_dir() else []:
        if entry.name.endswith(_PARTIAL) and time.time() - entry.stat().st_mtime > max_age_s:
            remove_tree(entry)


def bundles_in_use(config: NamespaceConfig) -> set[str]:
    """envd bundles that checkpoints need (a restored envd maps files of its bundle)."""
    found: set[str] = set()
    base = root(config)
    for entry in base.iterdir() if base.is_dir() else []:
        try:
            found.add(json.loads((entry / "meta.json").read_text())["envd_bundle"])
        except (OSError, ValueError, KeyError):
            continue
    return found
