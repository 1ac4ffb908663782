"""A real envd on the host, and SDK objects pointed straight at it (no server involved)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bac import AsyncSandbox
from bac._api import ApiClient
from bac._config import ConnectionConfig


@dataclass(frozen=True)
class HostEnvd:
    """A running envd process and what the SDK needs to reach it."""

    url: str
    token: str
    workdir: Path
    env_vars: dict[str, str]


def _sandbox_record(envd: HostEnvd) -> dict[str, str]:
    return {"sandboxID": "hostenvd", "envdVersion": "0.6.13", "envdAccessToken": envd.token}


def envd_sandbox(envd: HostEnvd) -> AsyncSandbox:
    """An AsyncSandbox whose envd traffic goes straight to ``envd`` (no server involved)."""
    config = ConnectionConfig.resolve(api_key="unused", sandbox_url=envd.url, env={})
    return AsyncSandbox(ApiClient(config), _sandbox_record(envd))
