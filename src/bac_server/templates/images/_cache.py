"""The image cache: one directory per image digest, published by one rename.

Layout under ``<data_dir>/images`` (0700: the shifted trees hold setuid binaries owned by
the sandbox id range, which no host user should be able to run)::

    sha256-<hex>/image.json, rootfs/   an imported OCI image (the recipe digest for Debian
                                       suites; ``-ids<base>-<size>`` appended for a
                                       non-default sandbox id range)
    .locks/<entry>.lock                flock held while one import of that entry runs
    .tmp/<pid>-<random>/               one import's scratch: tool temp files, the copied
                                       layout, the tree being built. Removed on success,
                                       failure and cancellation; after a crash, by the next
                                       import once the owning process is gone
    refs/<hash>.json                   the digest a registry tag last resolved to, used
                                       when the registry is unreachable

A reader sees an entry only once ``image.json`` is in it, so a half-written import is
never used.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

from bac_server.cancel_safe import off_loop
from bac_server.host import IdRange, remove_tree

from .._flock import locked
from ._model import ImageConfig, ImageError, ImportedImage

METADATA = "image.json"


def images_root(data_dir: Path) -> Path:
    root = data_dir / "images"
    for path in (root, root / ".locks", root / ".tmp", root / "refs"):
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(root, 0o700)
    return root


def entry_name(digest: str, id_range: IdRange) -> str:
    # ':' is overlayfs's lowerdir separator: keep it out of every path a mount may name.
    name = digest.replace(":", "-")
    return name if id_range == IdRange() else f"{name}-ids{id_range.base}-{id_range.size}"


def load(entry: Path) -> ImportedImage | None:
    """The published image in ``entry``, or None when there is none (yet)."""
    try:
        meta = json.loads((entry / METADATA).read_text())
        return ImportedImage(digest=str(meta["digest"]), rootfs=entry / "rootfs",
                             config=ImageConfig.from_json(meta["config"]))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError):
        return None  # damaged by hand: publishing writes it by rename, never torn


def publish(out: Path, entry: Path, meta: dict[str, object]) -> None:
    """Write ``image.json`` last into ``out``, then make it ``entry`` in one rename."""
    tmp = out / f".{METADATA}.tmp"
    tmp.write_text(json.dumps(meta, indent=2))
    os.rename(tmp, out / METADATA)
    if entry.exists():
        # Publishing never leaves an entry without valid metadata, so this one was damaged
        # by hand; sandboxes may still use its rootfs, so it is not deleted here.
        raise ImageError(f"the image cache entry {entry} is damaged (no valid {METADATA}); "
                         "remove it to import the image again")
    os.rename(out, entry)


@contextlib.asynccontextmanager
async def entry_lock(root: Path, name: str) -> AsyncIterator[None]:
    """Hold the entry's flock (across processes, and between tasks of this one)."""
    async with locked(root / ".locks" / f"{name}.lock"):
        yield


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale(tmp_root: Path) -> None:
    for child in tmp_root.iterdir():
        pid = child.name.partition("-")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            remove_tree(child)


@contextlib.asynccontextmanager
async def scratch_dir(root: Path) -> AsyncIterator[Path]:
    """A private directory for one import, removed whatever happens."""
    await off_loop(lambda: _remove_stale(root / ".tmp"))
    path = root / ".tmp" / f"{os.getpid()}-{secrets.token_hex(6)}"
    path.mkdir(mode=0o700)
    (path / "tmp").mkdir(mode=0o700)
    try:
        yield path
    finally:
        await off_loop(lambda: remove_tree(path))


def _ref_file(root: Path, ref: str) -> Path:
    return root / "refs" / (hashlib.sha256(ref.encode()).hexdigest()[:32] + ".json")


def remember(root: Path, digest: str, *refs: str) -> None:
    """Note that each of ``refs`` resolved to ``digest`` (written by rename: never torn)."""
    for ref in refs:
        path = _ref_file(root, ref)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        tmp.write_text(json.dumps({"ref": ref, "digest": digest}))
        os.rename(tmp, path)


def recall(root: Path, ref: str) -> str | None:
    try:
        data = json.loads(_ref_file(root, ref).read_text())
    except (FileNotFoundError, ValueError):
        return None
    return str(data["digest"]) if data.get("ref") == ref else None
