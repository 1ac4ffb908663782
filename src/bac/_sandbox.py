"""``AsyncSandbox``: one isolated machine, its lifecycle, and its envd modules.

Lifecycle calls (create, connect, info, timeout, kill, list) go to the REST API with
the team's API key; ``commands``, ``pty`` and ``files`` go to envd through the server's
gateway with the sandbox's own access token; ``run_code`` and the code contexts go to the
kernel server of a code-interpreter sandbox the same way (:mod:`bac._code_methods`).
"""

from __future__ import annotations

from typing import Any, Literal, Unpack

from bac import _errors as e
from bac import _lifecycle as lifecycle
from bac import _network as network_api
from bac._api import ApiClient
from bac._code import CodeClient
from bac._code_methods import AsyncCodeMethods
from bac._commands import AsyncCommands
from bac._config import ConnectionConfig, ConnectionOpts
from bac._dual import dual_method
from bac._envd import EnvdConnection
from bac._files import AsyncFilesystem
from bac._models import SandboxInfo, SandboxQuery
from bac._network import NetworkOpts
from bac._paginator import AsyncSandboxPaginator
from bac._pty import AsyncPty
from bac._signature import Operation, file_url, sign
from bac._state_methods import AsyncStateMethods, Lifecycle, lifecycle_body

DEFAULT_TEMPLATE = "base"
DEFAULT_TIMEOUT = 300


class AsyncSandbox(AsyncCodeMethods, AsyncStateMethods):
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
        **opts: Unpack[ConnectionOpts],
    ) -> AsyncSandbox:
        """Start a sandbox from ``template`` (or a snapshot id) that lives ``timeout``
        seconds unless extended; ``network`` sets its egress policy and whether its ports
        are public; ``lifecycle`` whether the timeout pauses instead of killing."""
        if timeout <= 0:
            raise e.InvalidArgumentError(f"timeout must be > 0 seconds, got {timeout}")
        body: dict[str, Any] = {
            "templateID": template,
            "timeout": timeout,
            "metadata": metadata or {},
            "envVars": envs or {},
        }
        if allow_internet_access is not None:
            body["allow_internet_access"] = allow_internet_access
        if network is not None:
            body["network"] = network_api.wire_network(network)
        body.update(lifecycle_body(lifecycle))
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

    async def update_network(self, network: NetworkOpts,
                             allow_internet_access: bool | None = None) -> None:
        """Replace the egress policy; the next connection follows it."""
        await network_api.update(self._api, self._sandbox_id, network, allow_internet_access)

    async def network_usage(self) -> dict[str, Any]:
        """Egress policy, bytes in and out, and recent destinations (allowed or not)."""
        return await network_api.usage(self._api, self._sandbox_id)

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

