"""Watching a directory in the sandbox for changes (``files.watch_dir``)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator
from typing import Any

from protobuf import Oneof

from bac import _errors as e
from bac._envd._command_handle import OutputHandler
from bac._envd._connection import await_opening
from bac._envd._errors import HealthProbe, translate
from bac._models import EntryInfo, FilesystemEvent, FilesystemEventType, FileType

_EVENT_TYPES = {
    "CREATE": FilesystemEventType.CREATE,
    "WRITE": FilesystemEventType.WRITE,
    "REMOVE": FilesystemEventType.REMOVE,
    "RENAME": FilesystemEventType.RENAME,
    "CHMOD": FilesystemEventType.CHMOD,
}
_FILE_TYPES = {"FILE": FileType.FILE, "DIRECTORY": FileType.DIR, "SYMLINK": FileType.SYMLINK}


def entry_info(entry: Any) -> EntryInfo:
    """Map envd's ``EntryInfo`` message to the SDK's dataclass."""
    file_type = _FILE_TYPES.get(getattr(entry.type, "name", ""))
    if getattr(entry, "is_symlink", False):
        file_type = FileType.SYMLINK
    modified = entry.modified_time.to_datetime() if entry.modified_time is not None else None
    return EntryInfo(
        name=entry.name,
        type=file_type,
        path=entry.path,
        size=int(entry.size),
        mode=int(entry.mode),
        permissions=entry.permissions,
        owner=entry.owner,
        group=entry.group,
        modified_time=modified,
        symlink_target=entry.symlink_target if entry.has_field("symlink_target") else None,
        metadata=dict(entry.metadata) or None,
    )


def filesystem_event(event: Any) -> FilesystemEvent | None:
    """Map one envd event; None for kinds this SDK does not know."""
    kind = _EVENT_TYPES.get(getattr(event.type, "name", ""))
    if kind is None:
        return None
    entry = entry_info(event.entry) if event.entry is not None else None
    return FilesystemEvent(name=event.name, type=kind, entry=entry)


class AsyncWatchHandle:
    """A running directory watch; ``stop()`` ends it.

    ``on_event`` gets each change as it happens; ``on_exit`` is called once when the
    watch ends: with None when stopped, else with the error that ended it (a
    :class:`TimeoutError` when the watch's ``timeout`` passed).
    """

    def __init__(
        self,
        events: AsyncIterator[Any],
        on_event: OutputHandler[FilesystemEvent],
        on_exit: OutputHandler[BaseException | None] | None,
        probe: HealthProbe,
    ) -> None:
        self._events = events
        self._on_event = on_event
        self._on_exit = on_exit
        self._probe = probe
        self._started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._pump())

    @classmethod
    async def open(
        cls,
        events: AsyncIterator[Any],
        on_event: OutputHandler[FilesystemEvent],
        on_exit: OutputHandler[BaseException | None] | None,
        probe: HealthProbe,
        request_timeout: float | None,
    ) -> AsyncWatchHandle:
        """Start reading ``events``; return once envd confirms the watch is in place."""
        handle = cls(events, on_event, on_exit, probe)
        await await_opening(handle._started, handle._task, request_timeout, "watch stream")
        return handle

    async def _pump(self) -> None:
        failure: BaseException | None = None
        try:
            try:
                await self._deliver()
            except Exception as exc:
                failure = await translate(exc, self._probe, e.PathNotFoundError)
                if isinstance(failure, asyncio.CancelledError):
                    raise failure from None  # stop() arrived wrapped by connectrpc
        except asyncio.CancelledError:
            if self._started.done():
                await self._exit(None)
            raise
        finally:
            with contextlib.suppress(Exception):
                await self._events.aclose()  # type: ignore[attr-defined]
            if not self._started.done():
                never = e.ServerError("envd closed the watch stream before it started")
                self._started.set_exception(failure or never)
        if self._started.exception() is None:
            await self._exit(failure)

    async def _deliver(self) -> None:
        async for response in self._events:
            if not self._started.done():
                if not (isinstance(response.event, Oneof) and response.event.field == "start"):
                    raise e.ServerError("envd's first watch event was not a start event")
                self._started.set_result(None)
                continue
            match response.event:
                case Oneof(field="filesystem", value=raw):
                    event = filesystem_event(raw)
                    if event is not None:
                        result = self._on_event(event)
                        if inspect.isawaitable(result):
                            await result

    async def _exit(self, failure: BaseException | None) -> None:
        if self._on_exit is None:
            return
        # The watch task has no caller to report a failing on_exit to.
        with contextlib.suppress(Exception):
            result = self._on_exit(failure)
            if inspect.isawaitable(result):
                await result

    @property
    def running(self) -> bool:
        """Whether events are still being delivered."""
        return not self._task.done()

    async def stop(self) -> None:
        """End the watch; no events are delivered after this returns."""
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
