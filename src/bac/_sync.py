"""``Sandbox``: the blocking twin of :class:`AsyncSandbox`, method for method.

Each method runs its async twin on the portal loop (:mod:`bac._portal`); callbacks
(``on_stdout``, ``on_result``...) run on that loop's thread.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncGenerator, AsyncIterator, Collection, Iterator, Mapping
from datetime import datetime
from typing import Any, Literal, Unpack

from bac import _errors as e
from bac._artefacts_sync import SandboxArtefacts
from bac._code import DEFAULT_RUN_TIMEOUT, Callback
from bac._code_results import Context, Execution, ExecutionError, OutputMessage, Result
from bac._config import ConnectionConfig, ConnectionOpts
from bac._costs import CapAction, SandboxUsage
from bac._desktop import Desktop
from bac._dual import dual_method
from bac._envd import Commands, Filesystem, Pty
from bac._lifecycle import Lifecycle
from bac._models import SandboxInfo, SandboxQuery
from bac._network import NetworkOpts
from bac._paginator import AsyncSandboxPaginator
from bac._portal import PORTAL
from bac._sandbox import DEFAULT_TEMPLATE, DEFAULT_TIMEOUT, AsyncSandbox
from bac._saving import Checkpoint, SnapshotInfo
from bac._trace import SandboxLogEntry, SandboxMetrics, TraceEvent, TracePage


class SandboxPaginator:
    """Blocking twin of :class:`AsyncSandboxPaginator`."""

    def __init__(self, inner: AsyncSandboxPaginator) -> None:
        self._inner = inner

    @property
    def has_next(self) -> bool:
        return self._inner.has_next

    @property
    def next_token(self) -> str | None:
        return self._inner.next_token

    def next_items(self) -> list[SandboxInfo]:
        return PORTAL.run(self._inner.next_items())


async def _next_event(stream: AsyncIterator[TraceEvent]) -> TraceEvent:
    return await anext(stream)


class TraceStream(Iterator[TraceEvent]):
    """A sandbox's trace as it happens (``Sandbox.follow_trace``)."""

    def __init__(self, inner: AsyncIterator[TraceEvent]) -> None:
        self._inner = inner

    def __next__(self) -> TraceEvent:
        try:
            return PORTAL.run(_next_event(self._inner))
        except StopAsyncIteration:
            raise StopIteration from None

    def close(self) -> None:
        if isinstance(self._inner, AsyncGenerator):
            PORTAL.run(self._inner.aclose())

    def __enter__(self) -> TraceStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Sandbox:
    """A running sandbox, driven with blocking calls. Make one with :meth:`create`.

    ::

        with Sandbox.create() as sandbox:       # killed when the block ends
            print(sandbox.commands.run("echo hello").stdout)
    """

    def __init__(self, inner: AsyncSandbox) -> None:
        self._inner = inner
        self._commands = Commands(inner.commands)
        self._pty = Pty(inner.pty)
        self._files = Filesystem(inner.files)
        self._desktop = Desktop(inner.desktop)
        self._artefacts = SandboxArtefacts(inner.artefacts)

    @property
    def sandbox_id(self) -> str:
        return self._inner.sandbox_id

    @property
    def envd_version(self) -> str:
        return self._inner.envd_version

    @property
    def commands(self) -> Commands:
        return self._commands

    @property
    def pty(self) -> Pty:
        return self._pty

    @property
    def files(self) -> Filesystem:
        return self._files

    @property
    def desktop(self) -> Desktop:
        """The screen of a ``desktop`` sandbox: screenshots and the live viewer's URL."""
        return self._desktop

    @property
    def artefacts(self) -> SandboxArtefacts:
        """See :attr:`AsyncSandbox.artefacts`."""
        return self._artefacts

    @property
    def connection_config(self) -> ConnectionConfig:
        return self._inner.connection_config

    @classmethod
    def create(
        cls,
        template: str = DEFAULT_TEMPLATE,
        timeout: int = DEFAULT_TIMEOUT,
        metadata: dict[str, str] | None = None,
        envs: dict[str, str] | None = None,
        allow_internet_access: bool | None = None,
        network: NetworkOpts | None = None,
        lifecycle: Lifecycle | None = None,
        cost_cap: float | None = None,
        cost_cap_action: CapAction | None = None,
        **opts: Unpack[ConnectionOpts],
    ) -> Sandbox:
        """Start a sandbox; see :meth:`AsyncSandbox.create`."""
        return cls(
            PORTAL.run(
                AsyncSandbox.create(
                    template, timeout, metadata, envs, allow_internet_access, network,
                    lifecycle, cost_cap, cost_cap_action, **opts
                )
            )
        )

    @classmethod
    def connect(
        cls, sandbox_id: str, timeout: int | None = None, **opts: Unpack[ConnectionOpts]
    ) -> Sandbox:
        """Attach to a running sandbox; see :meth:`AsyncSandbox.connect`."""
        return cls(PORTAL.run(AsyncSandbox.connect(sandbox_id, timeout, **opts)))

    @classmethod
    def attach(cls, sandbox_id: str, **opts: Unpack[ConnectionOpts]) -> Sandbox:
        """Attach without moving its end; see :meth:`AsyncSandbox.attach`."""
        return cls(PORTAL.run(AsyncSandbox.attach(sandbox_id, **opts)))

    @staticmethod
    def list(
        query: SandboxQuery | None = None,
        limit: int | None = None,
        next_token: str | None = None,
        order: Literal["asc", "desc"] | None = None,
        **opts: Unpack[ConnectionOpts],
    ) -> SandboxPaginator:
        """A paginator over this team's sandboxes; see :meth:`AsyncSandbox.list`."""
        return SandboxPaginator(AsyncSandbox.list(query, limit, next_token, order, **opts))

    def _kill(self, request_timeout: float | None = None) -> bool:
        """Kill the sandbox; False if it was already gone."""
        return PORTAL.run(self._inner.kill(request_timeout))

    def _kill_by_id(cls: Any, /, sandbox_id: str, **opts: Unpack[ConnectionOpts]) -> bool:
        return PORTAL.run(AsyncSandbox.kill(sandbox_id, **opts))

    kill = dual_method(_kill_by_id, _kill)

    def _set_timeout(self, timeout: int, request_timeout: float | None = None) -> None:
        """Make the sandbox end ``timeout`` seconds from now."""
        PORTAL.run(self._inner.set_timeout(timeout, request_timeout))

    def _set_timeout_by_id(
        cls: Any, /, sandbox_id: str, timeout: int, **opts: Unpack[ConnectionOpts]
    ) -> None:
        PORTAL.run(AsyncSandbox.set_timeout(sandbox_id, timeout, **opts))

    set_timeout = dual_method(_set_timeout_by_id, _set_timeout)

    def _get_info(self, request_timeout: float | None = None) -> SandboxInfo:
        """What the server knows about this sandbox."""
        return PORTAL.run(self._inner.get_info(request_timeout))

    def _get_info_by_id(
        cls: Any, /, sandbox_id: str, **opts: Unpack[ConnectionOpts]
    ) -> SandboxInfo:
        return PORTAL.run(AsyncSandbox.get_info(sandbox_id, **opts))

    get_info = dual_method(_get_info_by_id, _get_info)

    def _usage(self) -> SandboxUsage:
        """Its usage and cost so far, and the caps covering it; see ``AsyncSandbox.usage``."""
        return PORTAL.run(self._inner.usage())

    def _usage_by_id(cls: Any, /, sandbox_id: str,
                     **opts: Unpack[ConnectionOpts]) -> SandboxUsage:
        return PORTAL.run(AsyncSandbox.usage(sandbox_id, **opts))

    usage = dual_method(_usage_by_id, _usage)

    def _trace(self, *, kinds: Collection[str] | None = None, since: datetime | None = None,
               until: datetime | None = None, after: int = 0, limit: int = 100) -> TracePage:
        """A page of the sandbox's trace, oldest first (see ``AsyncSandbox.trace``)."""
        return PORTAL.run(self._inner.trace(kinds=kinds, since=since, until=until,
                                            after=after, limit=limit))

    def _trace_by_id(cls: Any, /, sandbox_id: str, *, kinds: Collection[str] | None = None,
                     since: datetime | None = None, until: datetime | None = None,
                     after: int = 0, limit: int = 100,
                     **opts: Unpack[ConnectionOpts]) -> TracePage:
        return PORTAL.run(AsyncSandbox.trace(sandbox_id, kinds=kinds, since=since,
                                             until=until, after=after, limit=limit, **opts))

    trace = dual_method(_trace_by_id, _trace)

    def _follow_trace(self, *, kinds: Collection[str] | None = None,
                      after: int = 0) -> TraceStream:
        """The trace as it happens, until the sandbox ends: iterate it; close it (or use
        ``with``) to stop early."""
        return TraceStream(self._inner.follow_trace(kinds=kinds, after=after))

    def _follow_trace_by_id(cls: Any, /, sandbox_id: str, *,
                            kinds: Collection[str] | None = None, after: int = 0,
                            **opts: Unpack[ConnectionOpts]) -> TraceStream:
        return TraceStream(AsyncSandbox.follow_trace(sandbox_id, kinds=kinds, after=after,
                                                     **opts))

    follow_trace = dual_method(_follow_trace_by_id, _follow_trace)

    @staticmethod
    def trace_run(metadata: Mapping[str, str], *, kinds: Collection[str] | None = None,
                  after: int = 0, limit: int = 100,
                  **opts: Unpack[ConnectionOpts]) -> TracePage:
        return PORTAL.run(AsyncSandbox.trace_run(metadata, kinds=kinds, after=after,
                                                 limit=limit, **opts))

    def logs(self, *, start: datetime | None = None,
             limit: int = 1000) -> builtins.list[SandboxLogEntry]:
        return PORTAL.run(self._inner.logs(start=start, limit=limit))

    def get_metrics(self, start: datetime | None = None,
                    end: datetime | None = None) -> builtins.list[SandboxMetrics]:
        return PORTAL.run(self._inner.get_metrics(start, end))

    def is_running(self) -> bool:
        return PORTAL.run(self._inner.is_running())

    def update_network(self, network: NetworkOpts,
                       allow_internet_access: bool | None = None) -> None:
        """Replace the egress policy; see :meth:`AsyncSandbox.update_network`."""
        PORTAL.run(self._inner.update_network(network, allow_internet_access))

    def network_usage(self) -> dict[str, Any]:
        return PORTAL.run(self._inner.network_usage())

    def get_host(self, port: int) -> str:
        return self._inner.get_host(port)

    def download_url(
        self, path: str, user: str | None = None, use_signature_expiration: int | None = None
    ) -> str:
        return self._inner.download_url(path, user, use_signature_expiration)

    def upload_url(
        self, path: str, user: str | None = None, use_signature_expiration: int | None = None
    ) -> str:
        return self._inner.upload_url(path, user, use_signature_expiration)

    # -- saved states -------------------------------------------------------------------

    def _pause(self, memory: bool = True) -> bool:
        """Pause; see :meth:`AsyncSandbox.pause`."""
        return PORTAL.run(self._inner.pause(memory))

    def _pause_by_id(cls: Any, /, sandbox_id: str, memory: bool = True,
                     **opts: Unpack[ConnectionOpts]) -> bool:
        return PORTAL.run(AsyncSandbox.pause(sandbox_id, memory, **opts))

    pause = dual_method(_pause_by_id, _pause)

    def _resume(self, timeout: int | None = None, memory: bool = True) -> None:
        """Resume; see :meth:`AsyncSandbox.resume`."""
        PORTAL.run(self._inner.resume(timeout, memory))

    def _resume_by_id(cls: Any, /, sandbox_id: str, timeout: int | None = None,
                      memory: bool = True, **opts: Unpack[ConnectionOpts]) -> None:
        PORTAL.run(AsyncSandbox.resume(sandbox_id, timeout, memory, **opts))

    resume = dual_method(_resume_by_id, _resume)

    def checkpoint(self, name: str | None = None, memory: bool = True) -> Checkpoint:
        return PORTAL.run(self._inner.checkpoint(name, memory))

    def _checkpoints(self) -> builtins.list[Checkpoint]:
        """The sandbox's checkpoints, oldest first."""
        return PORTAL.run(self._inner.checkpoints())

    def _checkpoints_by_id(cls: Any, /, sandbox_id: str,
                           **opts: Unpack[ConnectionOpts]) -> builtins.list[Checkpoint]:
        return PORTAL.run(AsyncSandbox.checkpoints(sandbox_id, **opts))

    checkpoints = dual_method(_checkpoints_by_id, _checkpoints)

    def _restore(self, checkpoint: Checkpoint | str) -> None:
        """Roll back to a checkpoint; see :meth:`AsyncSandbox.restore`."""
        PORTAL.run(self._inner.restore(checkpoint))

    def _restore_by_id(cls: Any, /, sandbox_id: str, checkpoint: Checkpoint | str,
                       **opts: Unpack[ConnectionOpts]) -> None:
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
             ) -> builtins.list[Sandbox | e.SandboxError]:
        results = PORTAL.run(self._inner.fork(count, timeout))
        return [r if isinstance(r, e.SandboxError) else Sandbox(r) for r in results]

    @staticmethod
    def list_snapshots(sandbox_id: str | None = None,
                       **opts: Unpack[ConnectionOpts]) -> builtins.list[SnapshotInfo]:
        return PORTAL.run(AsyncSandbox.list_snapshots(sandbox_id, **opts))

    @staticmethod
    def delete_snapshot(snapshot_id: str, **opts: Unpack[ConnectionOpts]) -> bool:
        return PORTAL.run(AsyncSandbox.delete_snapshot(snapshot_id, **opts))

    # -- the code interpreter -------------------------------------------------------------

    def run_code(
        self,
        code: str,
        language: str | None = None,
        context: Context | str | None = None,
        on_stdout: Callback[OutputMessage] | None = None,
        on_stderr: Callback[OutputMessage] | None = None,
        on_result: Callback[Result] | None = None,
        on_error: Callback[ExecutionError] | None = None,
        envs: dict[str, str] | None = None,
        timeout: float | None = DEFAULT_RUN_TIMEOUT,
        request_timeout: float | None = None,
    ) -> Execution:
        """Run ``code``; see :meth:`AsyncSandbox.run_code`."""
        return PORTAL.run(self._inner.run_code(
            code, language, context, on_stdout, on_stderr, on_result, on_error, envs,
            timeout, request_timeout,
        ))

    def create_code_context(
        self, cwd: str | None = None, language: str | None = None,
        request_timeout: float | None = None,
    ) -> Context:
        return PORTAL.run(self._inner.create_code_context(cwd, language, request_timeout))

    def list_code_contexts(
        self, request_timeout: float | None = None
    ) -> builtins.list[Context]:
        return PORTAL.run(self._inner.list_code_contexts(request_timeout))

    def restart_code_context(
        self, context: Context | str, request_timeout: float | None = None
    ) -> None:
        PORTAL.run(self._inner.restart_code_context(context, request_timeout))

    def remove_code_context(
        self, context: Context | str, request_timeout: float | None = None
    ) -> None:
        PORTAL.run(self._inner.remove_code_context(context, request_timeout))

    # -- this object's connections ----------------------------------------------------------

    def close(self) -> None:
        """Release this object's connections; the sandbox keeps running."""
        PORTAL.run(self._inner.aclose())

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        PORTAL.run(self._inner.__aexit__(*exc_info))
