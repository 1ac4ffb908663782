"""Built layers, stored once under ``<data_dir>/layers`` and shared by every template.

Layout (0700: layers hold setuid binaries owned by the sandbox id range)::

    <key>/layer.json          what made it: step, size, created, empty, facts
    <key>/diff/               the overlay upper directory the build step left
    .tmp/<key>.<pid>.<rand>/  a layer being built (and the files of its COPY)
    .locks/<key>              flock held by whoever builds <key>, in any process

A layer is published by one rename of a complete directory (``layer.json`` written
first), so a reader sees a whole layer or none. Builders of one key take its lock, look
again, and build only if it is still missing; a second builder (another process that did
not take the lock) that finds the key published discards its own copy. Temp directories
of a failed or cancelled step are removed by the step; those of a killed process by
``sweep`` (whose key lock nobody holds any more).

A key is ``digest`` of what made the layer (the build's state module says which parts):
the same key is the same layer, whichever template asked for it. Built templates are
named the same way, by the digest of their manifest.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from bac_server.host import remove_tree

from .._flock import locked

LAYER_FILE = "layer.json"
# Bump when the engine changes what a step produces from the same inputs.
KEY_VERSION = 1
KEY_LENGTH = 32  # hex digits: 128 bits name a layer; keeps overlay option strings short


def digest(*parts: object) -> str:
    """The key of what ``parts`` describe (a layer: its parent's key, the step, the state
    it ran in; a built template: its manifest), the same for the same parts anywhere."""
    blob = json.dumps([KEY_VERSION, *parts], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:KEY_LENGTH]


@dataclass(frozen=True)
class LayerInfo:
    key: str
    step: str  # the step that made it, as the log names it
    size: int  # bytes on disk of its diff
    created: float
    empty: bool  # its diff holds nothing: it is left out of overlay stacks
    facts: dict[str, str] = field(default_factory=dict)  # what the step learnt (a home, ...)


@dataclass(frozen=True)
class LayerWork:
    """A private directory to build one layer in."""

    key: str
    path: Path

    @property
    def upper(self) -> Path:
        """Where the build step writes (it must not exist yet; its parent does)."""
        return self.path / "layer" / "diff"

    @property
    def scratch(self) -> Path:
        """Room for the step's inputs (extracted COPY files); never published."""
        return self.path / "scratch"


class LayerStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    def setup(self) -> None:
        for path in (self.root, self.root / ".tmp", self.root / ".locks"):
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)

    def diff(self, key: str) -> Path:
        return self.root / key / "diff"

    def get(self, key: str) -> LayerInfo | None:
        """The published layer ``key``, or None."""
        try:
            raw = json.loads((self.root / key / LAYER_FILE).read_text())
        except FileNotFoundError:
            return None
        return LayerInfo(key=key, step=str(raw["step"]), size=int(raw["size"]),
                         created=float(raw["created"]), empty=bool(raw["empty"]),
                         facts={str(k): str(v) for k, v in raw.get("facts", {}).items()})

    @contextlib.asynccontextmanager
    async def lock(self, key: str) -> AsyncIterator[None]:
        """Exclusive right to build ``key``: in this process (asyncio) and across
        processes (flock), so at most one thread per key waits on the file lock."""
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock, locked(self.root / ".locks" / key):
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def new_work(self, key: str) -> LayerWork:
        """A fresh private directory for ``key``; the caller holds ``lock(key)``, so any
        other directory of that key is a leftover of a killed build."""
        for stale in (self.root / ".tmp").glob(f"{key}.*"):
            remove_tree(stale)
        work = LayerWork(key, self.root / ".tmp" / f"{key}.{os.getpid()}.{secrets.token_hex(4)}")
        work.path.mkdir(mode=0o700)
        (work.path / "layer").mkdir(mode=0o700)
        return work

    def publish(self, work: LayerWork, step: str, facts: dict[str, str]) -> LayerInfo:
        """Make ``work`` the layer ``work.key``; when it already exists, keep that one."""
        if not work.upper.exists():
            work.upper.mkdir(mode=0o755)
        size, entries = _usage(work.upper)
        info = LayerInfo(key=work.key, step=step, size=size, created=time.time(),
                         empty=entries == 0, facts=facts)
        out = work.path / "out"
        out.mkdir(mode=0o700)
        os.rename(work.upper, out / "diff")
        with open(out / LAYER_FILE, "w", encoding="utf-8") as handle:
            json.dump({"key": info.key, "step": step, "size": size, "created": info.created,
                       "empty": info.empty, "facts": facts}, handle, indent=2)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.rename(out, self.root / work.key)
        except OSError:
            existing = self.get(work.key)
            if existing is None:
                raise
            info = existing  # published meanwhile by a builder that did not lock
        remove_tree(work.path)
        return info

    def discard(self, work: LayerWork) -> None:
        remove_tree(work.path)

    def sweep(self) -> int:
        """Remove temp directories whose builder is gone; returns how many."""
        removed = 0
        for stale in list((self.root / ".tmp").iterdir()):
            key = stale.name.split(".", 1)[0]
            fd = os.open(self.root / ".locks" / key, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # being built right now
            finally:
                os.close(fd)  # closing drops the lock, if taken
            remove_tree(stale)
            removed += 1
        return removed


def _usage(root: Path) -> tuple[int, int]:
    """(bytes on disk, number of entries) under ``root``."""
    size = entries = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            entries += 1
            with contextlib.suppress(OSError):
                size += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return size, entries
