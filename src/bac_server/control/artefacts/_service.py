"""Artefact promotion: a sandbox's file or directory copied into durable storage under
(team, run id, name), idempotently, under the team's quota and for the retention's time.

A promotion reads the path out of the running sandbox through its envd (:mod:`._reading`,
as the sandbox's default user), into a partial blob hashed on the way (:mod:`._blobs`),
then publishes the blob and inserts the row together under the blob's lock. The row's key
is (team, run, name): promoting the same bytes again under a name is a no-op that returns
the row already there (``created`` False); other bytes under it are a ``Conflict``; many
identical promotions at once make one row (the store's insert keeps the first, the others
read it back). Each promotion, new or repeated, is an event in the sandbox's trace.

Quota: the team's artefacts together may use ``quota_bytes``; a promotion is refused
before the copy when the team is at it, the copy stops once it would pass it, and the row
is inserted only if the team stays within it, counted with the insert under the team's
lock, so promotions at once never pass it together (``QuotaExceeded``). Retention: rows older
than ``retention_s`` go, with their blobs once no row names them, every ``sweep_every_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import BinaryIO

from bac_server.backends.dialing import DIRECT, Dialer, connect_client
from bac_server.cancel_safe import to_the_end
from bac_server.store import ArtefactKind, ArtefactRecord, ArtefactStore, SandboxStore

from ..errors import Conflict, InvalidRequest, NotFound, QuotaExceeded
from ..keys import Team
from ..sandboxes import EventKind, Registry, SandboxState, event
from ._blobs import Blobs, Partial
from ._reading import Envd, Kind, PathNotFound, ReadFailed, SinkFailed, TooLarge, read_out

log = logging.getLogger(__name__)

# Run ids and names: path segments of the download URL, so no "/" and never "." or "..".
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-]{0,254}")
MAX_PATH = 4096
_EXPIRE_BATCH = 500


@dataclass(frozen=True)
class ArtefactSettings:
    quota_bytes: int = 10 << 30  # per team; 0: no quota
    retention_s: float = 30 * 86_400.0  # 0: kept until deleted
    copy_timeout_s: float = 600.0
    sweep_every_s: float = 600.0


@dataclass(frozen=True)
class Promotion:
    record: ArtefactRecord
    created: bool  # False: the same bytes were promoted under this name before


def check_key(what: str, value: str) -> str:
    if not _KEY.fullmatch(value):
        raise InvalidRequest(f"{what} {value[:60]!r} is not valid: 1 to 255 ASCII letters, "
                             "digits and . _ - starting with a letter or digit")
    return value


def _check_path(path: str) -> str:
    if not path or len(path) > MAX_PATH or "\0" in path:
        raise InvalidRequest(f"path must be 1 to {MAX_PATH} characters without NUL")
    return path


class Artefacts:
    def __init__(self, *, artefact_store: ArtefactStore, sandbox_store: SandboxStore,
                 registry: Registry, blobs: Blobs, settings: ArtefactSettings | None = None,
                 on_logged: Callable[[], None] | None = None,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC),
                 dialer: Dialer = DIRECT) -> None:
        """``on_logged``: called after each promotion's event is written (the trace's
        live followers); ``dialer``: how to reach a sandbox (the backend's)."""
        self._dialer = dialer
        self._store = artefact_store
        self._sandbox_store = sandbox_store
        self._registry = registry
        self.blobs = blobs
        self.settings = settings or ArtefactSettings()
        self._on_logged = on_logged
        self._now = now
        self._task: asyncio.Task[None] | None = None

    # -- promotion ---------------------------------------------------------------------
    async def promote(self, team: Team, sandbox_id: str, *, path: str, name: str,
                      run_id: str) -> Promotion:
        check_key("run id", run_id)
        check_key("name", name)
        _check_path(path)
        sbx = self._registry.owned(team, sandbox_id)
        route = self._registry.route(sandbox_id)
        if sbx.state is not SandboxState.RUNNING or route is None:
            raise Conflict(f"sandbox {sandbox_id!r} is paused; resume it first")
        existing = await self._store.get_artefact(team.team_id, run_id, name)
        bound = self._bound(existing, await self._store.artefact_bytes(team.team_id))
        partial = await self.blobs.partial()
        try:
            kind = await self._copy(Envd(route.address, route.envd_port,
                                         route.envd_access_token), sandbox_id, path,
                                    partial, bound, existing)
            await partial.finish()
        except BaseException:
            partial.discard()
            raise
        if existing is not None:
            partial.discard()
            return await self._again(team, sandbox_id, path, existing, partial.sha256)
        record = ArtefactRecord(
            team_id=team.team_id, run_id=run_id, name=name, sha256=partial.sha256,
            size_bytes=partial.size,
            kind=ArtefactKind.FILE if kind is Kind.FILE else ArtefactKind.DIRECTORY,
            sandbox_id=sandbox_id, source_path=path, created_at=self._now())
        stored = await to_the_end(self._publish(record, partial))
        if stored is None:
            raise QuotaExceeded(f"{path!r} ({record.size_bytes} bytes) would take the team's "
                                f"artefacts over its {self.settings.quota_bytes}-byte quota")
        if stored is not record:  # a promotion of the same name won the insert
            return await self._again(team, sandbox_id, path, stored, record.sha256)
        await self._log(team, sandbox_id, path, record, created=True)
        return Promotion(record, True)

    async def _publish(self, record: ArtefactRecord,
                       partial: Partial) -> ArtefactRecord | None:
        """The blob made visible and its row inserted, together under the blob's lock
        (run to the end: a client gone meanwhile leaves no blob without its row); returns
        the row kept, another promotion's when it inserted first, None when the quota
        (checked again with the insert) refused it."""
        async with self.blobs.holding(record.sha256):
            await self.blobs.publish(partial)
            stored = await self._store.add_artefact(
                record, max_team_bytes=self.settings.quota_bytes or None)
            if (stored is None or stored.sha256 != record.sha256) \
                    and not await self._store.blob_in_use(record.sha256):
                await self.blobs.remove(record.sha256)
        return stored

    def _bound(self, existing: ArtefactRecord | None, used: int) -> int | None:
        """The most bytes the copy may take: the existing row's (more is other bytes),
        else what the quota leaves."""
        if existing is not None:
            return existing.size_bytes
        quota = self.settings.quota_bytes
        if not quota:
            return None
        if used >= quota:
            raise QuotaExceeded(f"the team's artefacts use {used} bytes of its {quota}-byte "
                                "quota; delete some first")
        return quota - used

    async def _copy(self, envd: Envd, sandbox_id: str, path: str, partial: Partial,
                    bound: int | None, existing: ArtefactRecord | None) -> Kind:
        self._registry.traffic_started(sandbox_id)  # its idle policy sees the copy
        try:
            async with connect_client(self._dialer, sandbox_id) as http:
                return await read_out(envd, path, partial.write, max_bytes=bound,
                                      timeout_s=self.settings.copy_timeout_s,
                                      http_client=http)
        except PathNotFound as exc:
            raise NotFound(f"{path!r} not found in sandbox {sandbox_id!r}: {exc}") from exc
        except TooLarge as exc:
            if existing is not None:
                raise self._conflict(existing) from exc
            raise QuotaExceeded(f"{path!r} would take the team's artefacts over its "
                                f"{self.settings.quota_bytes}-byte quota") from exc
        except ReadFailed as exc:
            raise InvalidRequest(str(exc)) from exc
        except SinkFailed as exc:
            if isinstance(exc.__cause__, OSError) and exc.__cause__.errno == errno.ENOSPC:
                raise QuotaExceeded("the server's disk is full; the promotion was "
                                    "dropped") from exc
            raise
        finally:
            self._registry.traffic_ended(sandbox_id)

    @staticmethod
    def _conflict(existing: ArtefactRecord) -> Conflict:
        return Conflict(f"artefact {existing.name!r} of run {existing.run_id!r} exists with "
                        f"other content (sha256 {existing.sha256}); promote under another "
                        "name or delete it first")

    async def _again(self, team: Team, sandbox_id: str, path: str, existing: ArtefactRecord,
                     sha256: str) -> Promotion:
        if existing.sha256 != sha256:
            raise self._conflict(existing)
        await self._log(team, sandbox_id, path, existing, created=False)
        return Promotion(existing, False)

    async def _log(self, team: Team, sandbox_id: str, path: str, rec: ArtefactRecord, *,
                   created: bool) -> None:
        what = "promoted" if created else "already promoted (same content)"
        await self._sandbox_store.add_event(event(
            sandbox_id, team.team_id, EventKind.ARTEFACT_PROMOTED,
            f"{path} {what} as artefact {rec.name!r} of run {rec.run_id!r} "
            f"({rec.size_bytes} bytes)",
            run_id=rec.run_id, name=rec.name, path=path, sha256=rec.sha256,
            bytes=str(rec.size_bytes), artefact_kind=rec.kind.value,
            created="true" if created else "false"))
        if self._on_logged is not None:
            self._on_logged()

    # -- reading and deleting ----------------------------------------------------------
    async def listing(self, team: Team, run_id: str) -> list[ArtefactRecord]:
        return await self._store.list_artefacts(team.team_id, check_key("run id", run_id))

    async def get(self, team: Team, run_id: str, name: str) -> ArtefactRecord:
        found = await self._store.get_artefact(team.team_id, check_key("run id", run_id),
                                               check_key("name", name))
        if found is None:
            raise NotFound(f"artefact {name!r} of run {run_id!r} not found")
        return found

    async def open(self, team: Team, run_id: str, name: str) -> tuple[ArtefactRecord, BinaryIO]:
        """The artefact and its bytes, open (the caller closes the file): a delete after
        this does not cut the read short."""
        record = await self.get(team, run_id, name)
        try:
            handle: BinaryIO = await asyncio.to_thread(open, self.blobs.path(record.sha256), "rb")
        except FileNotFoundError as exc:
            raise NotFound(f"artefact {name!r} of run {run_id!r} not found") from exc
        return record, handle

    async def delete(self, team: Team, run_id: str, name: str) -> None:
        record = await self.get(team, run_id, name)
        await to_the_end(self._forget(record))

    async def _forget(self, record: ArtefactRecord) -> bool:
        async with self.blobs.holding(record.sha256):
            gone = await self._store.delete_artefact(record.team_id, record.run_id, record.name)
            if not await self._store.blob_in_use(record.sha256):
                await self.blobs.remove(record.sha256)
        return gone

    # -- retention ---------------------------------------------------------------------
    async def expire(self) -> int:
        """Delete the artefacts older than the retention once; returns how many went."""
        if not self.settings.retention_s:
            return 0
        before = self._now() - timedelta(seconds=self.settings.retention_s)
        gone = 0
        while True:
            batch = await self._store.artefacts_before(before, _EXPIRE_BATCH)
            for record in batch:
                gone += await self._forget(record)
            if len(batch) < _EXPIRE_BATCH:
                return gone

    async def _expire_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.sweep_every_s)
            try:
                gone = await self.expire()
                if gone:
                    log.info("artefact retention: %d artefact(s) deleted", gone)
            except Exception:
                log.exception("artefact retention pass failed")

    async def start(self) -> None:
        """Remove what a previous process left half-written or unnamed, then expire in the
        background."""
        await self.blobs.start()
        for sha256 in await self.blobs.sweep():
            async with self.blobs.holding(sha256):
                if not await self._store.blob_in_use(sha256):
                    await self.blobs.remove(sha256)
        self._task = asyncio.create_task(self._expire_forever())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
