"""``AsyncSandbox``: one isolated machine, its lifecycle and saved states, its envd modules
and its code interpreter.

Lifecycle calls (create, connect, info, timeout, kill, list), usage and the saved states
(pause, resume, checkpoints, snapshots, fork) go to the REST API with the team's API key
(:mod:`bac._lifecycle`, :mod:`bac._costs`, :mod:`bac._saving`, :mod:`bac._network`);
``commands``, ``pty`` and ``files`` go to envd through the server's gateway with the
sandbox's own access token; ``run_code`` and the code contexts go to the kernel server of a
code-interpreter sandbox the same way (:mod:`bac._code`).

The class is E2B's ``AsyncSandbox`` surface: each method is its signature, its docstring
and one call to the module that does the work.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncGenerator, Collection, Mapping
from datetime import datetime
from typing import Any, Literal, Unpack

from bac import _costs as costs
from bac import _errors as e
from bac import _lifecycle as lifecycle
from bac import _network as network_api
from bac import _saving as saving
from bac import _trace as trace_api
from bac._api import ApiClient
from bac._artefacts import AsyncSandboxArtefacts
from bac._code import DEFAULT_RUN_TIMEOUT, Callback, CodeClient
from bac._code_results import Context, Execution, ExecutionError, OutputMessage, Result
from bac._config import ConnectionConfig, ConnectionOpts, whole_seconds
from bac._costs import CapAction, SandboxUsage
from bac._desktop import AsyncDesktop
from bac._dual import dual_method
from bac._envd import (
    AsyncCommands,
    AsyncFilesystem,
    AsyncPty,
    EnvdConnection,
    Operation,
    file_url,
    sign,
)
from bac._lifecycle import Lifecycle, lifecycle_body
from bac._models import SandboxInfo, SandboxQuery
from bac._network import NetworkOpts
from bac._paginator import AsyncSandboxPaginator
from bac._saving import Checkpoint, SnapshotInfo
from bac._trace import SandboxLogEntry, SandboxMetrics, TraceEvent, TracePage

DEFAULT_TEMPLATE = "base"
DEFAULT_TIMEOUT = 300


class AsyncSandbox:
    """A running sandbox. Make one with :meth:`create` or :meth:`connect`.

    ::

        async with await AsyncSandbox.create() as sandbox:      # killed on exit
            result = await sandbox.commands.run("echo hello")
            print(result.stdout)
    """

    def __init__(self, api: ApiClient, sandbox: dict[str, Any]) -> None:
        try:
            self._sandbox_id = str(sandbox["sandboxID"])
            self._envd_version = str(sandbox["envdVersion"])
        except KeyError as exc:
            raise e.ServerError(f"the server's sandbox description lacks {exc}") from exc
        self._api = api
        self._config = api.config
        self._access_token: str | None = sandbox.get("envdAccessToken")
        self.traffic_access_token: str | None = sandbox.get("trafficAccessToken")
        self.sandbox_domain: str | None = sandbox.get("domain")
        self._envd = EnvdConnection(self._config, self._sandbox_id, self._access_token)
        self._commands = AsyncCommands(self._envd)
        self._pty = AsyncPty(self._envd, self._commands)
        self._files = AsyncFilesystem(self._envd)
        self._desktop = AsyncDesktop(api, self._sandbox_id, self._commands, self._files)
        self._artefacts = AsyncSandboxArtefacts(api, self._sandbox_id)
        self._code = CodeClient(self._config, self._sandbox_id, self._access_token,
                                self.traffic_access_token, self._envd.is_healthy)

    @property
    def sandbox_id(self) -> str:
        return self._sandbox_id

    @property
    def envd_version(self) -> str:
        return self._envd_version

    @property
    def commands(self) -> AsyncCommands:
        return self._commands

    @property
    def pty(self) -> AsyncPty:
        return self._pty

    @property
    def files(self) -> AsyncFilesystem:
        return self._files

    @property
    def desktop(self) -> AsyncDesktop:
        """The screen of a ``desktop`` sandbox: screenshots and the live viewer's URL."""
        return self._desktop

    @property
    def artefacts(self) -> AsyncSandboxArtefacts:
        """Its files and directories promoted into the server's durable storage under a
        run id and a name (``promote``), and a run's artefacts."""
        return self._artefacts

    @property
    def connection_config(self) -> ConnectionConfig:
        return self._config

    @classmethod
    async def create(
        cls,
        template: str = DEFAULT_TEMPLATE,
        timeout: int = DEFAULT_TIMEOUT,  # noqa: ASYNC109 - lifetime of the remote operation, E2B API
        metadata: dict[str, str] | None = None,
        envs: dict[str, str] | None = None,
        allow_internet_access: bool | None = None,
        network: NetworkOpts | None = None,
        lifecycle: Lifecycle | None = None,
        cost_cap: float | None = None,
        cost_cap_action: CapAction | None = None,
        **opts: Unpack[ConnectionOpts],
    ) -> AsyncSandbox:
        """Start a sandbox from ``template`` (or a snapshot id) that lives ``timeout``
        seconds unless extended (0: it has no end); ``network`` sets its egress policy and
        whether its ports are public; ``lifecycle`` whether the timeout pauses instead of
        killing; ``cost_cap`` caps its cost over its life (in the server's currency), at
        which ``cost_cap_action`` (``pause`` by default, or ``kill``) is taken."""
        body: dict[str, Any] = {
            "templateID": template,
            "timeout": whole_seconds(timeout, meaning=" (0: no end)"),
            "metadata": metadata or {},
            "envVars": envs or {},
        }
        if allow_internet_access is not None:
            body["allow_internet_access"] = allow_internet_access
        if network is not None:
            body["network"] = network_api.wire_network(network)
        body.update(lifecycle_body(lifecycle))
        body.update(costs.cost_cap_body(cost_cap, cost_cap_action))
        api = ApiClient(ConnectionConfig.resolve(**opts))
        try:
            created = await api.json(
                "POST", "/v2/sandboxes", json=body, ok=(200, 201), not_found=e.NotFoundError
            )
            return cls(api, created)
        except BaseException:
            await api.aclose()
            raise

    @classmethod
    async def connect(
        cls, sandbox_id: str, timeout: int | None = None, **opts: Unpack[ConnectionOpts]  # noqa: ASYNC109 - lifetime of the remote operation, E2B API
    ) -> AsyncSandbox:
        """Attach to a sandbox, resuming it if paused; ``timeout`` extends (never shortens)
        its life."""
        api = ApiClient(ConnectionConfig.resolve(**opts))
        body = {} if timeout is None else {"timeout": timeout}
        try:
            found = await api.json(
                "POST",
                "/v2" + lifecycle.sandbox_path(sandbox_id, "/connect"),
                json=body,
                ok=(200, 201),
                not_found=e.SandboxNotFoundError,
            )
            return cls(api, found)
        except BaseException:
            await api.aclose()
            raise

    @classmethod
    async def attach(cls, sandbox_id: str, **opts: Unpack[ConnectionOpts]) -> AsyncSandbox:
        """Attach to a running sandbox without moving its end (``connect`` may push it
        out); a paused one is resumed as ``connect`` resumes it."""
        api = ApiClient(ConnectionConfig.resolve(**opts))
        try:
            found = await api.json("GET", lifecycle.sandbox_path(sandbox_id), ok=(200,),
                                   not_found=e.SandboxNotFoundError)
        except BaseException:
            await api.aclose()
            raise
        if found.get("state") == "paused":
            await api.aclose()
            return await cls.connect(sandbox_id, **opts)
        try:
            return cls(api, found)
        except BaseException:
            await api.aclose()
            raise

    @staticmethod
    def list(
        query: SandboxQuery | None = None,
        limit: int | None = None,
        next_token: str | None = None,
        order: Literal["asc", "desc"] | None = None,
        **opts: Unpack[ConnectionOpts],
    ) -> AsyncSandboxPaginator:
        """A paginator over this team's sandboxes, newest first unless ``order="asc"``."""
        config = ConnectionConfig.resolve(**opts)
        config.require_api_key()
        return AsyncSandboxPaginator(config, query, limit, next_token, order)

    # -- lifecycle: each works as AsyncSandbox.op(sandbox_id, ...) or sandbox.op(...) --

    async def _kill(self, request_timeout: float | None = None) -> bool:
        """Kill the sandbox; False if it was already gone."""
        return await lifecycle.kill(self._api, self._sandbox_id, request_timeout)

    async def _kill_by_id(
        cls: Any, /, sandbox_id: str, **opts: Unpack[ConnectionOpts]
    ) -> bool:
        async with ApiClient(ConnectionConfig.resolve(**opts)) as api:
            return await lifecycle.kill(api, sandbox_id, None)

    kill = dual_method(_kill_by_id, _kill)

    async def _set_timeout(self, timeout: int, request_timeout: float | None = None) -> None:  # noqa: ASYNC109 - lifetime of the remote operation, E2B API
        """Make the sandbox end ``timeout`` seconds from now (this can shorten its life)."""
        await lifecycle.set_timeout(self._api, self._sandbox_id, timeout, request_timeout)

    async def _set_timeout_by_id(
        cls: Any, /, sandbox_id: str, timeout: int, **opts: Unpack[ConnectionOpts]  # noqa: ASYNC109 - lifetime of the remote operation, E2B API
    ) -> None:
        async with ApiClient(ConnectionConfig.resolve(**opts)) as api:
            await lifecycle.set_timeout(api, sandbox_id, timeout, None)

    set_timeout = dual_method(_set_timeout_by_id, _set_timeout)

    async def _get_info(self, request_timeout: float | None = None) -> SandboxInfo:
        """What the server knows about this sandbox (state, end time, metadata...)."""
        return await lifecycle.get_info(self._api, self._sandbox_id, request_timeout)

    async def _get_info_by_id(
        cls: Any, /, sandbox_id: str, **opts: Unpack[ConnectionOpts]
    ) -> SandboxInfo:
        async with ApiClient(ConnectionConfig.resolve(**opts)) as api:
            return await lifecycle.get_info(api, sandbox_id, None)

    get_info = dual_method(_get_info_by_id, _get_info)

    async def _usage(self) -> SandboxUsage:
        """What the sandbox used and cost over its life so far, and every cost cap that
        covers it (its own, its metadata groups', its team's)."""
        return await costs.sandbox_usage(self._api, self._sandbox_id)

    async def _usage_by_id(cls: Any, /, sandbox_id: str,
                           **opts: Unpack[ConnectionOpts]) -> SandboxUsage:
        async with ApiClient(ConnectionConfig.resolve(**opts)) as api:
            return await costs.sandbox_usage(api, sandbox_id)

    usage = dual_method(_usage_by_id, _usage)

    async def update_network(self, network: NetworkOpts,
                             allow_internet_access: bool | None = None) -> None:
        """Replace the egress policy; the next connection follows it."""
        await network_api.update(self._api, self._sandbox_id, network, allow_internet_access)

    async def network_usage(self) -> dict[str, Any]:
        """Egress policy, bytes in and out, and recent destinations (allowed or not)."""
        return await network_api.usage(self._api, self._sandbox_id)

    async def _trace(self, *, kinds: Collection[str] | None = None,
                     since: datetime | None = None, until: datetime | None = None,
                     after: int = 0, limit: int = 100) -> TracePage:
        """A page of the sandbox's trace, oldest first: its lifecycle, each process envd
        ran and each file transfer (``kinds`` filters, e.g. ``["process"]``); pass the
        page's ``next_cursor`` as ``after`` for the next. Readable after the end too."""
        return await trace_api.page(self._api, self._sandbox_id, kinds=kinds, since=since,
                                    until=until, after=after, limit=limit)

    async def _trace_by_id(cls: Any, /, sandbox_id: str, *,
                           kinds: Collection[str] | None = None,
                           since: datetime | None = None, until: datetime | None = None,
                           after: int = 0, limit: int = 100,
                           **opts: Unpack[ConnectionOpts]) -> TracePage:
        async with ApiClient(ConnectionConfig.resolve(**opts)) as api:
            return await trace_api.page(api, sandbox_id, kinds=kinds, since=since,
                                        until=until, after=after, limit=limit)

    trace = dual_method(_trace_by_id, _trace)

    def _follow_trace(self, *, kinds: Collection[str] | None = None,
                      after: int = 0) -> AsyncGenerator[TraceEvent, None]:
        """The trace after ``after``, then each new event as it happens, until the sandbox
        ends (``async for event in sandbox.follow_trace(): ...``)."""
        return trace_api.follow(self._api.config, self._sandbox_id, kinds=kinds, after=after)

    def _follow_trace_by_id(cls: Any, /, sandbox_id: str, *,
                            kinds: Collection[str] | None = None, after: int = 0,
                            **opts: Unpack[ConnectionOpts]
                            ) -> AsyncGenerator[TraceEvent, None]:
        return trace_api.follow(ConnectionConfig.resolve(**opts), sandbox_id, kinds=kinds,
                                after=after)

    follow_trace = dual_method(_follow_trace_by_id, _follow_trace)

    @staticmethod
    async def trace_run(metadata: Mapping[str, str], *,
                        kinds: Collection[str] | None = None, after: int = 0,
                        limit: int = 100, **opts: Unpack[ConnectionOpts]) -> TracePage:
        """A page of a run's trace: every sandbox of the team whose metadata holds each
        pair of ``metadata`` (e.g. ``{"run_id": "r42"}``), oldest first."""
        async with ApiClient(ConnectionConfig.resolve(**opts)) as api:
            return await trace_api.run(api, metadata, kinds=kinds, after=after, limit=limit)

    async def logs(self, *, start: datetime | None = None,
                   limit: int = 1000) -> builtins.list[SandboxLogEntry]:
        """The sandbox's log as E2B shapes it (``GET /sandboxes/{id}/logs``)."""
        return await trace_api.logs(self._api, self._sandbox_id, start=start, limit=limit)

    async def get_metrics(self, start: datetime | None = None,
                          end: datetime | None = None) -> builtins.list[SandboxMetrics]:
        """Resource samples (CPU, memory, disk) between ``start`` and ``end``."""
        return await trace_api.metrics(self._api, self._sandbox_id, start=start, end=end)

    async def is_running(self) -> bool:
        """Whether envd in the sandbox answers; False once the sandbox is gone."""
        return await self._envd.is_healthy()

    def get_host(self, port: int) -> str:
        """Host name that reaches ``port`` in the sandbox through the gateway."""
        if not 0 < port < 65536:
            raise e.InvalidArgumentError(f"port must be 1-65535, got {port}")
        return f"{port}-{self._sandbox_id}.{self._config.host_domain(self.sandbox_domain)}"

    def _signed_url(
        self, path: str, operation: Operation, user: str | None, expires_in: int | None
    ) -> str:
        if self._access_token is None:
            if expires_in is not None:
                raise e.InvalidArgumentError("this sandbox has no access token to sign with")
            return file_url(self._envd.base_url, path, user)
        signature = sign(path, operation, user, self._access_token, expires_in)
        return file_url(self._envd.base_url, path, user, signature)

    def download_url(
        self, path: str, user: str | None = None, use_signature_expiration: int | None = None
    ) -> str:
        """A URL anyone can GET to download ``path`` (until it expires, if it does)."""
        return self._signed_url(path, "read", user, use_signature_expiration)

    def upload_url(
        self, path: str, user: str | None = None, use_signature_expiration: int | None = None
    ) -> str:
        """A URL anyone can POST a multipart ``file`` field to, writing ``path``."""
        return self._signed_url(path, "write", user, use_signature_expiration)

    # -- saved states: pause, resume, checkpoints, snapshots, forks (bac._saving) ------------

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

    async def _checkpoints(self) -> builtins.list[Checkpoint]:
        """The sandbox's checkpoints, oldest first (also of a paused sandbox)."""
        return await saving.checkpoints(self._api, self._sandbox_id)

    async def _checkpoints_by_id(cls: Any, /, sandbox_id: str,
                                 **opts: Unpack[ConnectionOpts]) -> builtins.list[Checkpoint]:
        async with ApiClient(ConnectionConfig.resolve(**opts)) as api:
            return await saving.checkpoints(api, sandbox_id)

    checkpoints = dual_method(_checkpoints_by_id, _checkpoints)

    async def _restore(self, checkpoint: Checkpoint | str) -> None:
        """Roll the sandbox (running or paused) back to one of its checkpoints (a
        checkpoint, its id or its name): files, processes and memory. It is running
        afterwards. A name several checkpoints share raises ``InvalidArgumentError``."""
        await saving.restore(self._api, self._sandbox_id, checkpoint)

    async def _restore_by_id(cls: Any, /, sandbox_id: str, checkpoint: Checkpoint | str,
                             **opts: Unpack[ConnectionOpts]) -> None:
        async with ApiClient(ConnectionConfig.resolve(**opts)) as api:
            await saving.restore(api, sandbox_id, checkpoint)

    restore = dual_method(_restore_by_id, _restore)

    async def delete_checkpoint(self, checkpoint: Checkpoint | str) -> bool:
        return await saving.delete_checkpoint(self._api, self._sandbox_id, checkpoint)

    async def schedule_checkpoints(self, every: int | None, keep: int | None = None) -> None:
        """Take a checkpoint every ``every`` seconds keeping the last ``keep`` (None: stop)."""
        await saving.schedule(self._api, self._sandbox_id, every, keep)

    async def snapshot(self, name: str | None = None, memory: bool = True) -> SnapshotInfo:
        """A snapshot that outlives the sandbox; ``AsyncSandbox.create(snapshot_id)``
        starts new sandboxes from it. The sandbox keeps running."""
        return await saving.snapshot(self._api, self._sandbox_id, name, memory)

    create_snapshot = snapshot

    async def fork(self, count: int = 1, timeout: int | None = None  # noqa: ASYNC109 - lifetime of the remote operation
                   ) -> builtins.list[AsyncSandbox | e.SandboxError]:
        """``count`` new sandboxes continuing from this one's current state (each with its
        own id and network); one entry per fork, a sandbox or the error that stopped it."""
        results = await saving.fork(self._api, self._sandbox_id, count, timeout)
        return [AsyncSandbox(ApiClient(self._config), r) if isinstance(r, dict) else r
                for r in results]

    @staticmethod
    async def list_snapshots(sandbox_id: str | None = None,
                             **opts: Unpack[ConnectionOpts]) -> builtins.list[SnapshotInfo]:
        async with ApiClient(ConnectionConfig.resolve(**opts)) as api:
            return await saving.snapshots(api, sandbox_id)

    @staticmethod
    async def delete_snapshot(snapshot_id: str, **opts: Unpack[ConnectionOpts]) -> bool:
        async with ApiClient(ConnectionConfig.resolve(**opts)) as api:
            return await saving.delete_snapshot(api, snapshot_id)

    # -- the code interpreter (bac._code) -------------------------------------------------

    async def run_code(
        self,
        code: str,
        language: str | None = None,
        context: Context | str | None = None,
        on_stdout: Callback[OutputMessage] | None = None,
        on_stderr: Callback[OutputMessage] | None = None,
        on_result: Callback[Result] | None = None,
        on_error: Callback[ExecutionError] | None = None,
        envs: dict[str, str] | None = None,
        timeout: float | None = DEFAULT_RUN_TIMEOUT,  # noqa: ASYNC109 - E2B API
        request_timeout: float | None = None,
    ) -> Execution:
        """Run ``code`` in ``context`` (a context or its id), else the default context of
        ``language`` (Python when neither is given).

        Callbacks (plain or coroutine functions) fire as the kernel produces output,
        before the cell ends. An exception raised by the code is not raised here: it is
        ``execution.error``. ``timeout`` bounds the whole execution (0/None: none);
        when it passes, the kernel is interrupted and :class:`~bac.TimeoutError` raised.
        """
        return await self._code.run(code, language, context, envs, timeout, request_timeout,
                                    on_stdout, on_stderr, on_result, on_error)

    async def create_code_context(
        self, cwd: str | None = None, language: str | None = None,
        request_timeout: float | None = None,
    ) -> Context:
        """A new kernel with its own state (Python unless ``language``), in ``cwd``."""
        return await self._code.create_context(cwd, language, request_timeout)

    async def list_code_contexts(
        self, request_timeout: float | None = None
    ) -> builtins.list[Context]:
        """Every context of the sandbox's kernel server."""
        return await self._code.list_contexts(request_timeout)

    async def restart_code_context(
        self, context: Context | str, request_timeout: float | None = None
    ) -> None:
        """Restart the context's kernel: same id and cwd, all state lost."""
        await self._code.restart_context(context, request_timeout)

    async def remove_code_context(
        self, context: Context | str, request_timeout: float | None = None
    ) -> None:
        """Stop the context's kernel for good."""
        await self._code.remove_context(context, request_timeout)

    # -- this object's connections ----------------------------------------------------------

    async def aclose(self) -> None:
        """Release this object's connections; the sandbox keeps running."""
        await self._envd.aclose()
        await self._code.aclose()
        await self._api.aclose()

    async def __aenter__(self) -> AsyncSandbox:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        try:
            await self._kill()
        finally:
            await self.aclose()

