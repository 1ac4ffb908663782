"""Pause, resume, checkpoints, snapshots and forks, mixed into ``AsyncSandbox`` and
``Sandbox`` (their calls are in :mod:`bac._saving`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack

from bac import _errors as e
from bac import _saving as saving
from bac._api import ApiClient
from bac._config import ConnectionConfig, ConnectionOpts
from bac._dual import dual_method
from bac._portal import PORTAL
from bac._saving import Checkpoint, SnapshotInfo

if TYPE_CHECKING:
    from bac._sandbox import AsyncSandbox
    from bac._sync import Sandbox


class Lifecycle(TypedDict, total=False):
    """What happens at the timeout: ``on_timeout="pause"`` pauses instead of killing
    (``keep_memory=False``: files only), ``auto_resume`` resumes a paused sandbox on the next
    call to it."""

    on_timeout: Literal["kill", "pause"]
    keep_memory: bool
    auto_resume: bool


def lifecycle_body(lifecycle: Lifecycle | None) -> dict[str, Any]:
    if not lifecycle:
        return {}
    action = lifecycle.get("on_timeout", "kill")
    if action not in ("kill", "pause"):
        raise e.InvalidArgumentError(f"on_timeout must be 'kill' or 'pause', got {action!r}")
    body: dict[str, Any] = {"autoPause": action == "pause"}
    if "keep_memory" in lifecycle:
        body["autoPauseMemory"] = bool(lifecycle["keep_memory"])
    if "auto_resume" in lifecycle:
        body["autoResume"] = {"enabled": bool(lifecycle["auto_resume"])}
    return body


def _ref(checkpoint: Checkpoint | str) -> str:
    return checkpoint.checkpoint_id if isinstance(checkpoint, Checkpoint) else checkpoint


class AsyncStateMethods:
    """State methods of :class:`AsyncSandbox`."""

    _api: ApiClient
    _sandbox_id: str
    _config: ConnectionConfig

    async def _pause(self, memory: bool = True) -> bool:
        """Pause: processes, memory and files are saved and the memory freed (``memory=
        False``: files only; resuming starts it afresh). False if it was already paused."""
        return await saving.pause(self._api, self._sandbox_id, memory)

    async def _pause_by_id(cls: Any, /, sandbox_id: str, memory: bool = True,
                           **opts: Unpack[ConnectionOpts]) -> bool:
        async with ApiClient(ConnectionConfig.resolve(**opts)) as api:
            return await saving.pause(api, sandbox_id, memory)

    pause = dual_method(_pause_by_id, _pause)

    async def _resume(self, timeout: int | None = None, memory: bool = True) -> None:  # noqa: ASYNC109 - lifetime of the remote operation
        """Resume the paused sandbox (same id, token and processes); ``memory=False``
        starts it afresh on its files. On a running sandbox it only extends the timeout."""
        await saving.connect(self._api, self._sandbox_id, timeout, memory)

    async def _resume_by_id(cls: Any, /, sandbox_id: str, timeout: int | None = None,  # noqa: ASYNC109 - lifetime of the remote operation
                            memory: bool = True, **opts: Unpack[ConnectionOpts]) -> None:
        async with ApiClient(ConnectionConfig.resolve(**opts)) as api:
            await saving.connect(api, sandbox_id, timeout, memory)

    resume = dual_method(_resume_by_id, _resume)

    async def checkpoint(self, name: str | None = None, memory: bool = True) -> Checkpoint:
        """Save the sandbox's state now; it keeps running."""
        return await saving.checkpoint(self._api, self._sandbox_id, name, memory)

    async def _checkpoints(self) -> list[Checkpoint]:
        """The sandbox's checkpoints, oldest first (also of a paused sandbox)."""
        return await saving.checkpoints(self._api, self._sandbox_id)

    async def _checkpoints_by_id(cls: Any, /, sandbox_id: str,
                                 **opts: Unpack[ConnectionOpts]) -> list[Checkpoint]:
        async with ApiClient(ConnectionConfig.resolve(**opts)) as api:
            return await saving.checkpoints(api, sandbox_id)

    checkpoints = dual_method(_checkpoints_by_id, _checkpoints)

    async def _restore(self, checkpoint: Checkpoint | str) -> None:
        """Roll the sandbox (running or paused) back to one of its checkpoints: files,
        processes and memory. It is running afterwards."""
        await saving.restore(self._api, self._sandbox_id, _ref(checkpoint))

    async def _restore_by_id(cls: Any, /, sandbox_id: str, checkpoint: Checkpoint | str,
                             **opts: Unpack[ConnectionOpts]) -> None:
        async with ApiClient(ConnectionConfig.resolve(**opts)) as api:
            await saving.restore(api, sandbox_id, _ref(checkpoint))

    restore = dual_method(_restore_by_id, _restore)

    async def delete_checkpoint(self, checkpoint: Checkpoint | str) -> bool:
        return await saving.delete_checkpoint(self._api, self._sandbox_id, _ref(checkpoint))

    async def schedule_checkpoints(self, every: int | None, keep: int | None = None) -> None:
        """Take a checkpoint every ``every`` seconds keeping the last ``keep`` (None: stop)."""
        await saving.schedule(self._api, self._sandbox_id, every, keep)

    async def snapshot(self, name: str | None = None, memory: bool = True) -> SnapshotInfo:
        """A snapshot that outlives the sandbox; ``AsyncSandbox.create(snapshot_id)``
        starts new sandboxes from it. The sandbox keeps running."""
        return await saving.snapshot(self._api, self._sandbox_id, name, memory)

    create_snapshot = snapshot

    async def fork(self, count: int = 1, timeout: int | None = None  # noqa: ASYNC109 - lifetime of the remote operation
                   ) -> list[AsyncSandbox | e.SandboxError]:
        """``count`` new sandboxes continuing from this one's current state (each with its
        own id and network); one entry per fork, a sandbox or the error that stopped it."""
        from bac._sandbox import AsyncSandbox

        results = await saving.fork(self._api, self._sandbox_id, count, timeout)
        return [AsyncSandbox(ApiClient(self._config), r) if isinstance(r, dict) else r
                for r in results]

    @staticmethod
    async def list_snapshots(sandbox_id: str | None = None,
                             **opts: Unpack[ConnectionOpts]) -> list[SnapshotInfo]:
        async with ApiClient(ConnectionConfig.resolve(**opts)) as api:
            return await saving.snapshots(api, sandbox_id)

    @staticmethod
    async def delete_snapshot(snapshot_id: str, **opts: Unpack[ConnectionOpts]) -> bool:
        async with ApiClient(ConnectionConfig.resolve(**opts)) as api:
            return await saving.delete_snapshot(api, snapshot_id)


class StateMethods:
    """Blocking twins of :class:`AsyncStateMethods`, mixed into :class:`Sandbox`."""

    _inner: AsyncSandbox

    def _pause(self, memory: bool = True) -> bool:
        """Pause; see :meth:`AsyncSandbox.pause`."""
        return PORTAL.run(self._inner.pause(memory))

    def _pause_by_id(cls: Any, /, sandbox_id: str, memory: bool = True,
                     **opts: Unpack[ConnectionOpts]) -> bool:
        from bac._sandbox import AsyncSandbox

        return PORTAL.run(AsyncSandbox.pause(sandbox_id, memory, **opts))

    pause = dual_method(_pause_by_id, _pause)

    def _resume(self, timeout: int | None = None, memory: bool = True) -> None:
        """Resume; see :meth:`AsyncSandbox.resume`."""
        PORTAL.run(self._inner.resume(timeout, memory))

    def _resume_by_id(cls: Any, /, sandbox_id: str, timeout: int | None = None,
                      memory: bool = True, **opts: Unpack[ConnectionOpts]) -> None:
        from bac._sandbox import AsyncSandbox

        PORTAL.run(AsyncSandbox.resume(sandbox_id, timeout, memory, **opts))

    resume = dual_method(_resume_by_id, _resume)

    def checkpoint(self, name: str | None = None, memory: bool = True) -> Checkpoint:
        return PORTAL.run(self._inner.checkpoint(name, memory))

    def _checkpoints(self) -> list[Checkpoint]:
        """The sandbox's checkpoints, oldest first."""
        return PORTAL.run(self._inner.checkpoints())

    def _checkpoints_by_id(cls: Any, /, sandbox_id: str,
                           **opts: Unpack[ConnectionOpts]) -> list[Checkpoint]:
        from bac._sandbox import AsyncSandbox

        return PORTAL.run(AsyncSandbox.checkpoints(sandbox_id, **opts))

    checkpoints = dual_method(_checkpoints_by_id, _checkpoints)

    def _restore(self, checkpoint: Checkpoint | str) -> None:
        """Roll back to a checkpoint; see :meth:`AsyncSandbox.restore`."""
        PORTAL.run(self._inner.restore(checkpoint))

    def _restore_by_id(cls: Any, /, sandbox_id: str, checkpoint: Checkpoint | str,
                       **opts: Unpack[ConnectionOpts]) -> None:
        from bac._sandbox import AsyncSandbox

        PORTAL.run(AsyncSandbox.restore(sandbox_id, checkpoint, **opts))

    restore = dual_method(_restore_by_id, _restore)

    def delete_checkpoint(self, checkpoint: Checkpoint | str) -> bool:
        return PORTAL.run(self._inner.delete_checkpoint(checkpoint))

    def schedule_checkpoints(self, every: int | None, keep: int | None = None) -> None:
        PORTAL.run(self._inner.schedule_checkpoints(every, keep))

    def snapshot(self, name: str | None = None, memory: bool = True) -> SnapshotInfo:
        return PORTAL.run(self._inner.snapshot(name, memory))

    create_snapshot = snapshot

    def fork(self, count: int = 1, timeout: int | None = None
             ) -> list[Sandbox | e.SandboxError]:
        from bac._sync import Sandbox

        results = PORTAL.run(self._inner.fork(count, timeout))
        return [r if isinstance(r, e.SandboxError) else Sandbox(r) for r in results]

    @staticmethod
    def list_snapshots(sandbox_id: str | None = None,
                       **opts: Unpack[ConnectionOpts]) -> list[SnapshotInfo]:
        return PORTAL.run(AsyncStateMethods.list_snapshots(sandbox_id, **opts))

    @staticmethod
    def delete_snapshot(snapshot_id: str, **opts: Unpack[ConnectionOpts]) -> bool:
        return PORTAL.run(AsyncStateMethods.delete_snapshot(snapshot_id, **opts))
