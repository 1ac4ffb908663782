"""``Handover``: a suspended sandbox's state on storage every node shares, so that another
node can take the sandbox over when its own is lost (docs/scale-out.md, *Paused
sandboxes move*).

Only with ``NamespaceConfig.handover_dir`` (``BAC_NODE_HANDOVER_DIR``), which every node
mounts at the same path. Once a suspend has returned, its state is *exported* there in
the background, off the pause's path::

    <handover>/<sandbox id>/<export>/        0700 root; <export> is the slot's own name
        meta.json        what it is and what restoring it needs (a checkpoint's meta)
        config.json      the slot's OCI config
        upper.tar        the overlay's upper layer: owners, modes, xattrs, whiteouts
        images/          CRIU images (processes, memory, sockets); suspends with memory

It is written under ``<export>.partial``, made durable (``syncfs``) and renamed into
place: another node takes only a complete one. The upper layer travels as a tar archive
so that the shared file system need not keep overlayfs' whiteout devices and
``trusted.*`` attributes itself (NFS does not).

A wake, a roll-back or a destroy of the sandbox on its node *withdraws* its export first:
the renaming that retires it happens before the sandbox runs again, so no node can ever
take over an older state than the one it would resume (if the shared storage refuses the
rename, the wake fails and the sandbox stays paused). ``take`` on another node copies a
complete export into a checkpoint directory of its own (``Stored``) for the copy to start
from (``_copies.start_copy``), and retires the export once the sandbox runs there.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from bac_server.backends.base import CheckpointFailed, CheckpointNotFound
from bac_server.cancel_safe import off_loop
from bac_server.host import remove_tree, sync_directory, write_private

from ..slots import Context, SlotRecord, save_record
from ._stored import Meta, Stored, check_id
from ._writeback import sync_file_systems

_log = logging.getLogger(__name__)

_PARTIAL = ".partial"
_RETIRED = ".retired-"
_ARCHIVE = "upper.tar"
# The tar options that keep what overlayfs needs of an upper layer: owners by number,
# whiteouts (character devices 0:0), ``trusted.overlay.*`` and security attributes,
# holes in sparse files.
_TAR_KEEP = ("--xattrs", "--xattrs-include=*", "--numeric-owner", "--sparse")
EXPORTS_AT_ONCE = 2


async def _run(*argv: str) -> None:
    """Run a copying command to its end; killed if the caller is cancelled."""
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE)
    try:
        _, err = await proc.communicate()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise
    if proc.returncode != 0:
        raise CheckpointFailed(f"{argv[0]} failed: {err.decode(errors='replace')[-500:]}")


def _retire(path: Path) -> Path | None:
    """Rename ``path`` out of the names a node takes (blocking); returns where it went."""
    target = path.with_name(f"{_RETIRED}{uuid.uuid4().hex}")
    try:
        os.rename(path, target)
    except FileNotFoundError:
        return None
    return target


class Handover:
    def __init__(self, ctx: Context, tasks: set[asyncio.Future[None]]) -> None:
        # ``tasks``: where the backend keeps work that its close() waits for (bounded).
        self._ctx = ctx
        self.root = ctx.config.handover_dir
        self._tasks = tasks
        self._exports: dict[str, asyncio.Task[None]] = {}  # sandbox id -> its export
        # Exports at once: a fleet pause suspends hundreds; their copies queue here rather
        # than compete for the disk and the network all together.
        self._copying = asyncio.Semaphore(EXPORTS_AT_ONCE)

    @property
    def enabled(self) -> bool:
        return self.root is not None

    def _dir(self, sandbox_id: str) -> Path:
        check_id(sandbox_id)
        assert self.root is not None
        return self.root / sandbox_id

    def sweep(self) -> None:
        """At start-up: what an interrupted export or retirement left (any node's: old
        enough that nobody still writes it). Blocking."""
        if self.root is None or not self.root.is_dir():
            return
        now = time.time()
        for sandbox_dir in self.root.iterdir():
            for entry in sandbox_dir.iterdir() if sandbox_dir.is_dir() else ():
                stale = entry.name.startswith(_RETIRED) or entry.name.endswith(_PARTIAL)
                if stale and now - entry.stat().st_mtime > 3600:
                    remove_tree(entry)
            with contextlib.suppress(OSError):
                sandbox_dir.rmdir()  # only when empty

    # -- on the sandbox's node --------------------------------------------------------

    def export(self, sandbox_id: str, record: SlotRecord, images: Path | None) -> None:
        """Start writing the suspended sandbox's state (its files, and ``images``: its
        suspend's, None without memory) to the shared storage, once its suspend is done;
        a later ``withdraw`` stops it."""
        if self.root is None:
            return
        if record.volumes:
            # Its volumes are kept on this machine: it can only resume here.
            _log.debug("sandbox %s mounts volumes: not exported", sandbox_id)
            return
        name = record.handover = uuid.uuid4().hex
        save_record(self._ctx.paths(record.slot), record)
        task = asyncio.create_task(self._export(sandbox_id, record, name, images))
        self._exports[sandbox_id] = task
        self._tasks.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            self._tasks.discard(finished)
            if self._exports.get(sandbox_id) is finished:
                del self._exports[sandbox_id]
            if not finished.cancelled() and finished.exception() is not None:
                _log.warning("exporting sandbox %s for another node failed (it resumes "
                             "only on its own node): %s", sandbox_id, finished.exception())

        task.add_done_callback(done)

    async def _export(self, sandbox_id: str, record: SlotRecord, name: str,
                      images: Path | None) -> None:
        began = time.monotonic()
        home = self._dir(sandbox_id)
        work = home / (name + _PARTIAL)
        async with self._copying:
            await self._write(sandbox_id, record, name, images, home, work)
        _log.debug("sandbox %s exported for another node in %.0f ms", sandbox_id,
                   (time.monotonic() - began) * 1000)

    async def _write(self, sandbox_id: str, record: SlotRecord, name: str,
                     images: Path | None, home: Path, work: Path) -> None:
        paths = self._ctx.paths(record.slot)
        memory = images is not None

        def fresh() -> None:
            home.mkdir(mode=0o700, parents=True, exist_ok=True)
            remove_tree(work)
            work.mkdir(mode=0o700)

        await off_loop(fresh)
        try:
            await _run("tar", "--create", "--file", str(work / _ARCHIVE), *_TAR_KEEP,
                       "--directory", str(paths.layer / "upper"), ".")
            if images is not None:
                await _run("cp", "-R", "--preserve=mode,timestamps", "--", str(images),
                           str(work / "images"))
            meta = Meta(checkpoint_id=sandbox_id, sandbox_id=sandbox_id,
                        created_at=time.time(), memory=memory, size_bytes=0,
                        template_id=record.template_id,
                        template_rootfs=record.template_rootfs,
                        envd_bundle=record.envd_bundle,
                        layers=tuple(str(p) for p in record.layer_stack))

            def publish() -> None:
                shutil.copyfile(paths.config, work / "config.json")
                write_private(work / "meta.json", json.dumps(dataclasses.asdict(meta)))
                sync_file_systems([work])
                os.replace(work, home / name)
                sync_directory(home)

            await off_loop(publish)
        except BaseException:
            await off_loop(lambda: remove_tree(work))
            raise

    async def withdraw(self, sandbox_id: str, record: SlotRecord, *,
                       gone: bool = False) -> None:
        """The sandbox runs again here, or is ``gone`` (its slot torn down): stop its
        export and retire it before anything changes its state. Raises
        ``CheckpointFailed`` if the shared storage refuses (the caller then must not go
        on)."""
        task = self._exports.pop(sandbox_id, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        name = record.handover
        if self.root is None or name is None:
            return
        home = self._dir(sandbox_id)
        try:
            retired = await off_loop(lambda: _retire(home / name))
        except OSError as exc:
            raise CheckpointFailed(f"retiring sandbox {sandbox_id}'s export on the shared "
                                   f"storage failed: {exc}") from exc
        record.handover = None
        if not gone:
            save_record(self._ctx.paths(record.slot), record)
        if retired is not None:
            self._delete_later(retired, home)

    def _delete_later(self, path: Path, home: Path) -> None:
        def delete() -> None:
            remove_tree(path)
            with contextlib.suppress(OSError):
                home.rmdir()  # only when empty

        task = asyncio.ensure_future(off_loop(delete))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- on the node taking it over ---------------------------------------------------

    @contextlib.asynccontextmanager
    async def take(self, sandbox_id: str) -> AsyncIterator[Stored]:
        """The sandbox's newest complete export, copied into a checkpoint directory of this
        node for a copy to start from; raises ``CheckpointNotFound`` without one. The
        export is retired if the block ends without an exception (the sandbox runs here);
        the local copy is deleted in any case."""
        if self.root is None:
            raise CheckpointNotFound(
                f"sandbox {sandbox_id}: this node has no shared storage for paused "
                "sandboxes (BAC_NODE_HANDOVER_DIR)")
        home = self._dir(sandbox_id)

        def newest() -> Path:
            found: list[tuple[float, Path]] = []
            for entry in home.iterdir() if home.is_dir() else ():
                if entry.name.startswith((".", _RETIRED)) or entry.name.endswith(_PARTIAL):
                    continue
                with contextlib.suppress(OSError, ValueError, KeyError):
                    meta = json.loads((entry / "meta.json").read_text())
                    found.append((float(meta["created_at"]), entry))
            if not found:
                raise CheckpointNotFound(
                    f"sandbox {sandbox_id}: no paused state of it is on the shared storage")
            return max(found)[1]

        source = await off_loop(newest)
        local = Stored(self._ctx.config.data_dir / "taking-over" / sandbox_id)

        def lay_out() -> None:
            local.path.parent.mkdir(mode=0o700, exist_ok=True)
            remove_tree(local.path)
            local.path.mkdir(mode=0o710)
            os.chown(local.path, 0, self._ctx.config.id_range.root)
            local.upper.mkdir(mode=0o755)
            shutil.copyfile(source / "config.json", local.config)
            shutil.copyfile(source / "meta.json", local.meta_file)

        try:
            await off_loop(lay_out)
            await _run("tar", "--extract", "--file", str(source / _ARCHIVE), *_TAR_KEEP,
                       "--same-permissions", "--same-owner",
                       "--directory", str(local.upper))
            if (source / "images").is_dir():
                await _run("cp", "-R", "--preserve=mode,timestamps", "--",
                           str(source / "images"), str(local.dump.images))
            yield local
            retired = await off_loop(lambda: _retire(source))
            if retired is not None:
                self._delete_later(retired, home)
        finally:
            await off_loop(lambda: remove_tree(local.path))

