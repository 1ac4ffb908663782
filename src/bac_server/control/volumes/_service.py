"""Volumes: E2B's API over the backend's volume storage (``backends.base.VolumeHost``).

A volume belongs to a team, is named uniquely in it (sandboxes mount volumes by name),
and has a bearer token of its own for the content API (``GET /volumes/{id}`` hands it to
the team again: sealed in the store, not hashed). Each volume is a file system of
``size_mb`` on the host; the team's volumes together may measure ``quota_mb`` (checked
with the insert, so creates at once never pass it together).

A create's ``volumeMounts`` are checked before the sandbox is made (names of the team's
volumes, absolute paths clear of the system's trees, each path once) and bound into it
once it runs; a bind that fails ends the sandbox (fails closed). Which sandbox mounts
what is kept in the store (a restarted server still refuses to destroy a volume in use)
and here in memory (what ``GET /sandboxes`` shows). A volume mounted by a sandbox that
has not ended (running or paused) cannot be destroyed: 409, kill the sandbox first.

Over several machines (``VolumeRelay``: ``bac node``), a volume is kept on one node: the
sandboxes that mount it are placed there, one sandbox mounts the volumes of one machine
only (400 otherwise), and the content API's requests are served by that node
(``authorize`` answers a ``Relayed`` instead of the content).
"""

from __future__ import annotations

import asyncio
import errno
import hmac
import logging
import posixpath
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bac_server.backends.base import (
    Backend,
    BackendError,
    NodeUnreachable,
    RelayedAnswer,
    SandboxNotFound,
    VolumeBind,
    VolumeHost,
    VolumeMountFailed,
    VolumeRelay,
)
from bac_server.cancel_safe import to_the_end
from bac_server.host import IdRange
from bac_server.store import StoreConflict, VolumeMountRecord, VolumeRecord, VolumeStore

from ..errors import (
    Conflict,
    InvalidRequest,
    NotFound,
    NotSupported,
    OutOfCapacity,
    Unauthenticated,
)
from ..keys import Team
from ..sandboxes import LIVE_STATES, Lifecycle, LiveSandbox, Registry
from ..tokens import new_access_token, new_sandbox_id
from ._content import VolumeContent

log = logging.getLogger(__name__)

# Names: what E2B's dashboard allows, and a safe path segment.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-]{0,254}")
MAX_MOUNTS = 16
_MAX_PATH = 1024
# Where a volume may not go: the sandbox's own system trees, what Bac binds into it, and
# the root itself.
_RESERVED = ("/proc", "/sys", "/dev", "/run/bac", "/opt/bac", "/etc", "/bin", "/sbin",
             "/lib", "/lib64", "/usr", "/boot")


@dataclass(frozen=True)
class VolumeSettings:
    size_mb: int = 1024  # each volume's file system
    quota_mb: int = 20_480  # all of a team's volumes together; 0: no bound


@dataclass(frozen=True)
class Mount:
    """One of a create's ``volumeMounts``, checked: the volume and the path inside."""

    volume: VolumeRecord
    path: str


def mount_path(path: str) -> str:
    """The path a volume is mounted at, checked: absolute, normal, not ``/`` nor in or
    over a system tree (400 naming why)."""
    if not path.startswith("/") or "\x00" in path or len(path) > _MAX_PATH:
        raise InvalidRequest(f"volumeMounts: path {path[:100]!r} must be an absolute path "
                             f"of at most {_MAX_PATH} characters")
    norm = posixpath.normpath(path)
    if norm != path.rstrip("/") or "//" in path:
        raise InvalidRequest(f"volumeMounts: path {path!r} is not normal (write {norm!r})")
    if norm in ("/", "/."):
        raise InvalidRequest("volumeMounts: a volume cannot be mounted at /")
    for tree in _RESERVED:
        if norm == tree or norm.startswith(tree + "/") or tree.startswith(norm + "/"):
            raise InvalidRequest(f"volumeMounts: {norm} is in or over {tree}, which the "
                                 "sandbox's system needs; mount volumes elsewhere (e.g. "
                                 "/mnt/data)")
    return norm


def content_at(root: Path) -> VolumeContent:
    """A volume's content whose directory is ``root`` on this host."""
    # Owners shift by the sandboxes' id range (every sandbox's: one range per host).
    return VolumeContent(root, IdRange())


@dataclass(frozen=True)
class Relayed:
    """A volume whose content the machine keeping it serves (``VolumeRelay``)."""

    volume_id: str
    relay: VolumeRelay

    async def send(self, method: str, path: str, query: str,
                   headers: Sequence[tuple[str, str]],
                   body: AsyncIterator[bytes]) -> RelayedAnswer:
        """The content API's request as that machine answers it; ``OutOfCapacity`` (503,
        retry) when it does not answer."""
        try:
            return await self.relay.relay_volume(self.volume_id, method, path, query,
                                                 headers, body)
        except NodeUnreachable as exc:
            raise OutOfCapacity(f"the machine that keeps volume {self.volume_id} does not "
                                f"answer now: {exc}") from exc


class Volumes:
    def __init__(self, *, volume_store: VolumeStore, backend: Backend, registry: Registry,
                 lifecycle: Lifecycle, settings: VolumeSettings | None = None) -> None:
        self._store = volume_store
        self._backend = backend
        self._registry = registry
        self._lifecycle = lifecycle
        self.settings = settings or VolumeSettings()
        # sandbox id -> [(volume name, path)]: what its listing shows.
        self._mounted: dict[str, list[tuple[str, str]]] = {}
        self._forgetting: set[asyncio.Future[None]] = set()
        registry.on_gone(self._maybe_ended)

    def _host(self) -> VolumeHost:
        if not isinstance(self._backend, VolumeHost):
            raise NotSupported(f"the {self._backend.name!r} backend keeps no volumes")
        return self._backend

    async def start(self) -> None:
        """Mount every volume's file system (again, after a reboot); learn who mounts
        what, forgetting the mounts of sandboxes that ended while the server was down."""
        if not isinstance(self._backend, VolumeHost):
            return
        names = {}
        for volume in await self._store.all_volumes():
            names[volume.volume_id] = volume.name
            try:
                await self._backend.volume_dir(volume.volume_id)
            except (OSError, BackendError) as exc:
                log.error("volume %s (%s) cannot be mounted: %s", volume.volume_id,
                          volume.name, exc)
        for mount in await self._store.all_mounts():
            if self._live(mount.sandbox_id):
                self._mounted.setdefault(mount.sandbox_id, []).append(
                    (names.get(mount.volume_id, mount.volume_id), mount.path))
            else:
                await self._store.delete_mounts(mount.sandbox_id)

    def _live(self, sandbox_id: str) -> bool:
        sbx = self._registry.get(sandbox_id)
        return sbx is not None and sbx.state in LIVE_STATES

    def _maybe_ended(self, sandbox_id: str) -> None:
        # Called when it stops being routable: a pause too, which keeps its mounts.
        if sandbox_id in self._mounted and not self._live(sandbox_id):
            del self._mounted[sandbox_id]
            task = asyncio.ensure_future(to_the_end(self._forget(sandbox_id)))
            self._forgetting.add(task)
            task.add_done_callback(self._forgetting.discard)

    async def _forget(self, sandbox_id: str) -> None:
        try:
            await self._store.delete_mounts(sandbox_id)
        except Exception as exc:  # the next start forgets them
            log.warning("the ended sandbox %s's volume mounts stay recorded until the "
                        "next start: %s", sandbox_id, exc)

    async def close(self) -> None:
        """Wait for the ended sandboxes' mounts to be forgotten."""
        if self._forgetting:
            await asyncio.gather(*self._forgetting, return_exceptions=True)

    # -- E2B's /volumes ------------------------------------------------------------------

    async def create(self, team: Team, name: str) -> VolumeRecord:
        host = self._host()
        if not _NAME.fullmatch(name):
            raise InvalidRequest("name: 1 to 255 letters, digits, '.', '_' or '-', starting "
                                 "with a letter or digit")
        size = self.settings.size_mb
        volume = VolumeRecord(volume_id=new_sandbox_id(), team_id=team.team_id, name=name,
                              token=new_access_token(), size_mb=size,
                              created_at=datetime.now(UTC))
        quota = self.settings.quota_mb or None
        try:
            added = await self._store.add_volume(volume, max_team_mb=quota)
        except StoreConflict:
            raise Conflict(f"the team has a volume named {name!r} already") from None
        if not added:
            raise InvalidRequest(
                f"volume quota: the team's volumes may measure {quota} MiB together and "
                f"each new one is {size} MiB; destroy one first (BAC_VOLUME_QUOTA_MB)")
        try:
            await to_the_end(host.make_volume(volume.volume_id, size))
        except BaseException as exc:
            await to_the_end(self._store.delete_volume(volume.volume_id))
            await to_the_end(host.drop_volume(volume.volume_id))
            if isinstance(exc, OSError):
                log.error("volume %s could not be made: %s", volume.volume_id, exc)
                raise InvalidRequest(
                    "the volume could not be made on this server (its log says why)"
                ) from exc
            raise
        return volume

    async def listing(self, team: Team) -> list[VolumeRecord]:
        return await self._store.list_volumes(team.team_id)

    async def get(self, team: Team, volume_id: str) -> VolumeRecord:
        volume = await self._store.get_volume(volume_id)
        if volume is None or volume.team_id != team.team_id:
            raise NotFound(f"volume {volume_id!r} not found")
        return volume

    async def destroy(self, team: Team, volume_id: str) -> None:
        volume = await self.get(team, volume_id)
        users = sorted({m.sandbox_id for m in await self._store.mounts_of_volume(volume_id)
                        if self._live(m.sandbox_id)})
        if users:
            raise Conflict(f"volume {volume.name!r} is mounted by sandbox(es) "
                           f"{', '.join(users[:5])}; kill them first")
        await to_the_end(self._store.delete_volume(volume_id))
        if isinstance(self._backend, VolumeHost):
            await to_the_end(self._backend.drop_volume(volume_id))

    # -- the content API -----------------------------------------------------------------

    async def authorize(self, volume_id: str, authorization: str | None
                        ) -> VolumeContent | Relayed:
        """The volume's content for a caller presenting its bearer token (``Relayed``:
        the machine that keeps it serves it); one answer, ``Unauthenticated``, for a
        missing, wrong or another volume's token and an unknown volume."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("Authorization: Bearer <the volume's token> is required")
        volume = await self._store.get_volume(volume_id) if volume_id.isalnum() else None
        if volume is None or not hmac.compare_digest(volume.token.encode(),
                                                     token.strip().encode()):
            raise Unauthenticated("the volume's token is wrong, or there is no such volume")
        host = self._host()
        if isinstance(host, VolumeRelay):
            return Relayed(volume_id, host)
        try:
            root = await host.volume_dir(volume_id)
        except OSError as exc:
            log.error("volume %s cannot be reached: %s", volume_id, exc)
            if exc.errno == errno.ENOENT:
                raise NotFound(f"volume {volume_id!r} has no storage on this server") from exc
            raise
        return content_at(root)

    # -- mounts --------------------------------------------------------------------------

    async def check_mounts(self, team: Team, wanted: Sequence[tuple[str, str]]) -> list[Mount]:
        """A create's ``volumeMounts`` as (name, path): each the team's volume, at a path
        it may take, no path twice (400, or 404 naming a volume the team lacks)."""
        if not wanted:
            return []
        self._host()
        if len(wanted) > MAX_MOUNTS:
            raise InvalidRequest(f"volumeMounts: at most {MAX_MOUNTS} volumes per sandbox")
        mounts: list[Mount] = []
        seen: set[str] = set()
        for name, raw in wanted:
            path = mount_path(raw)
            for other in seen:
                if path == other or path.startswith(other + "/") or \
                        other.startswith(path + "/"):
                    raise InvalidRequest(f"volumeMounts: {path} and {other} overlap")
            seen.add(path)
            volume = await self._store.volume_named(team.team_id, name)
            if volume is None:
                raise NotFound(f"volumeMounts: the team has no volume named {name!r}")
            mounts.append(Mount(volume, path))
        host = self._host()
        if isinstance(host, VolumeRelay):
            try:
                await host.volumes_together([m.volume.volume_id for m in mounts])
            except VolumeMountFailed as exc:
                raise InvalidRequest(f"volumeMounts: {exc}") from exc
        return mounts

    async def attach(self, team: Team, sbx: LiveSandbox, mounts: Sequence[Mount]) -> None:
        """Bind the checked mounts into the sandbox just made; on failure it is ended and
        the error is the caller's (400 naming the path)."""
        if not mounts:
            return
        records = [VolumeMountRecord(sbx.sandbox_id, m.path, m.volume.volume_id,
                                     team.team_id) for m in mounts]
        try:
            # Recorded first: a destroy from now on sees the volume in use.
            await self._store.add_mounts(records)
            self._mounted[sbx.sandbox_id] = [(m.volume.name, m.path) for m in mounts]
            await self._host().mount_volumes(
                sbx.sandbox_id, [VolumeBind(m.volume.volume_id, m.path) for m in mounts])
        except BaseException as exc:
            self._mounted.pop(sbx.sandbox_id, None)
            await to_the_end(self._end(team, sbx))
            if isinstance(exc, VolumeMountFailed):
                raise InvalidRequest(f"volumeMounts: {exc}") from exc
            if isinstance(exc, (SandboxNotFound, OSError)):
                log.error("binding volumes into %s failed: %s", sbx.sandbox_id, exc)
                raise InvalidRequest("volumeMounts: the volumes could not be mounted "
                                     "(the server's log says why)") from exc
            raise

    async def _end(self, team: Team, sbx: LiveSandbox) -> None:
        try:
            await self._lifecycle.kill(team, sbx.sandbox_id)
        except NotFound:
            pass
        await self._store.delete_mounts(sbx.sandbox_id)

    def refuse_snapshot(self, team: Team, sandbox_id: str) -> None:
        """``Conflict`` when the team's sandbox mounts volumes: a snapshot outlives it,
        and could outlive its volumes (docs/volumes-secrets-artefacts.md, *Checkpoints*).
        Its checkpoints (gone with it) and its forks (made at once) are fine."""
        mounted = self._mounted.get(sandbox_id)
        if mounted:
            self._registry.owned(team, sandbox_id, activity=False)  # another's: 404
            paths = ", ".join(path for _, path in mounted)
            raise Conflict(f"a snapshot of a sandbox with volumes mounted ({paths}) is not "
                           "taken: a volume is never saved in one, and a snapshot would "
                           "outlive the sandbox and could outlive the volume; checkpoints "
                           "and forks of it keep its volumes")

    async def inherit(self, team: Team, fork: LiveSandbox, source_id: str) -> None:
        """A fork of ``source_id`` mounts the source's volumes at the same paths (bound
        back by its restore, or now); on failure the fork is ended and the error raised."""
        mounted = self._mounted.get(source_id)
        if not mounted:
            return
        records = await self._store.mounts_of(source_id)
        names = dict((path, name) for name, path in mounted)
        volumes = {m.volume_id: m for m in records}
        try:
            await self._store.add_mounts([
                VolumeMountRecord(fork.sandbox_id, m.path, m.volume_id, team.team_id)
                for m in records])
            self._mounted[fork.sandbox_id] = [(names.get(m.path, m.volume_id), m.path)
                                              for m in records]
            await self._host().mount_volumes(
                fork.sandbox_id, [VolumeBind(m.volume_id, m.path) for m in records])
        except BaseException as exc:
            self._mounted.pop(fork.sandbox_id, None)
            await to_the_end(self._end(team, fork))
            if isinstance(exc, (VolumeMountFailed, SandboxNotFound, OSError)):
                log.error("binding volumes %s into the fork %s failed: %s",
                          sorted(volumes), fork.sandbox_id, exc)
                raise Conflict("the fork could not mount its source's volumes (the "
                               "server's log says why)") from exc
            raise

    def mounts_of(self, sandbox_id: str) -> list[tuple[str, str]]:
        """(volume name, path) of each volume the sandbox mounts."""
        return list(self._mounted.get(sandbox_id, ()))
