"""What template storage holds: every entry a collection may delete, and which entry a
path that a sandbox or manifest names belongs to.

Entries under a template root ``<root>``::

    layer     layers/<key>/                 a build step's layer (or a squashed rootfs)
    image     images/<name>/                an imported image's rootfs
    builtin   templates/<name>/<digest>/    a build of a built-in template (base, ...)
    manifest  templates/manifests/<d>.json  a built template: which of the above it stacks

Dot-names (``.tmp``, ``.locks``, ``.trash``, builds in progress) are never entries, and a
built-in's directory that is a symbolic link (a data dir borrowing another's ``base``) is
not ours to collect. Paths are compared after resolving symbolic links on both sides, so
two spellings of one directory are one entry.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..builtin import METADATA_FILE
from ..images import METADATA as IMAGE_METADATA
from ..layers import manifest_dir


class Kind(enum.Enum):
    LAYER = "layer"
    IMAGE = "image"
    BUILTIN = "builtin"
    MANIFEST = "manifest"


@dataclass(frozen=True)
class Entry:
    kind: Kind
    name: str  # key, image entry, "<builtin>/<digest>" or manifest digest
    path: Path
    lock: Path | None = None  # the build lock to hold while moving it to the trash

    @property
    def label(self) -> str:
        return f"{self.kind.value} {self.name}"


@dataclass(frozen=True)
class Roots:
    """The directories of one template root, symbolic links resolved."""

    root: Path

    @classmethod
    def of(cls, root: Path) -> Roots:
        return cls(Path(os.path.realpath(root)))

    @property
    def layers(self) -> Path:
        return self.root / "layers"

    @property
    def images(self) -> Path:
        return self.root / "images"

    @property
    def templates(self) -> Path:
        return self.root / "templates"

    @property
    def manifests(self) -> Path:
        return manifest_dir(self.root)


def _dirs(parent: Path) -> list[Path]:
    try:
        return sorted(p for p in parent.iterdir()
                      if not p.name.startswith(".") and p.is_dir() and not p.is_symlink())
    except FileNotFoundError:
        return []


def layer_entries(roots: Roots) -> list[Entry]:
    return [Entry(Kind.LAYER, p.name, p, roots.layers / ".locks" / p.name)
            for p in _dirs(roots.layers)]


def image_entries(roots: Roots) -> list[Entry]:
    return [Entry(Kind.IMAGE, p.name, p, roots.images / ".locks" / f"{p.name}.lock")
            for p in _dirs(roots.images)
            if p.name != "refs" and (p / IMAGE_METADATA).is_file()]


def builtin_entries(roots: Roots, names: Iterable[str]) -> list[Entry]:
    """Complete builds of each built-in (a build in progress is a dot-directory)."""
    found: list[Entry] = []
    for name in names:
        parent = roots.templates / name
        if parent.is_symlink():
            continue
        found.extend(Entry(Kind.BUILTIN, f"{name}/{p.name}", p, roots.templates / ".lock")
                     for p in _dirs(parent) if (p / METADATA_FILE).is_file())
    return found


def manifest_entries(roots: Roots) -> list[Entry]:
    try:
        files = sorted(roots.manifests.glob("*.json"))
    except FileNotFoundError:
        return []
    return [Entry(Kind.MANIFEST, p.stem, p) for p in files if not p.name.startswith(".")]


def owner(path: Path, roots: Roots) -> tuple[Kind, str] | None:
    """The entry ``path`` (a layer diff, a rootfs) lies in, if it is one of ``roots``."""
    real = Path(os.path.realpath(path))
    for kind, parent, depth in ((Kind.LAYER, roots.layers, 1), (Kind.IMAGE, roots.images, 1),
                                (Kind.BUILTIN, roots.templates, 2)):
        if not real.is_relative_to(parent):
            continue
        parts = real.relative_to(parent).parts
        if len(parts) >= depth:
            return kind, "/".join(parts[:depth])
    return None


def disk_usage(path: Path) -> int:
    """Bytes on disk under ``path`` (not following links; a file or a directory)."""
    try:
        if not path.is_dir() or path.is_symlink():
            return path.lstat().st_blocks * 512
    except FileNotFoundError:
        return 0
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        for name in (*dirnames, *filenames):
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                continue
    return total
