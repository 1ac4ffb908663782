"""Request bodies of the sandbox routes (strict: see :mod:`bac_server.api.body`).

``cpuCount`` and ``memoryMB`` on create are Bac extensions.
"""

from __future__ import annotations

from typing import Any

from pydantic import StrictBool, StrictInt, StrictStr

from bac_server.api.body import Name, Open, Strict
from bac_server.api.network import NetworkConfig


class AutoResume(Strict):
    enabled: StrictBool


class VolumeMount(Strict):
    name: StrictStr
    path: StrictStr


class NewSandbox(Strict):
    templateID: Name
    timeout: StrictInt | None = None
    autoPause: StrictBool | None = None
    autoPauseMemory: StrictBool | None = None
    autoResume: AutoResume | None = None
    secure: StrictBool | None = None
    allow_internet_access: StrictBool | None = None
    network: NetworkConfig | None = None
    metadata: dict[StrictStr, StrictStr] | None = None
    envVars: dict[StrictStr, StrictStr] | None = None
    mcp: dict[str, Any] | None = None
    iam: Open | None = None
    volumeMounts: list[VolumeMount] | None = None
    cpuCount: StrictInt | None = None
    memoryMB: StrictInt | None = None


class ConnectSandbox(Strict):
    timeout: StrictInt | None = None
    memory: StrictBool | None = None


class ConnectSandboxV1(Strict):
    timeout: StrictInt
    memory: StrictBool | None = None


class TimeoutRequest(Strict):
    timeout: StrictInt


class RefreshRequest(Strict):
    duration: StrictInt | None = None


class PauseRequest(Strict):
    memory: StrictBool | None = None
    requireHealthyGuest: StrictBool | None = None


class ResumeRequest(Strict):
    timeout: StrictInt | None = None
    autoPause: StrictBool | None = None
    memory: StrictBool | None = None


class SnapshotRequest(Strict):
    """``POST /sandboxes/{id}/snapshots`` (E2B)."""

    name: Name | None = None
    memory: StrictBool | None = None


class ForkRequest(Strict):
    """``POST /sandboxes/{id}/fork`` (E2B)."""

    timeout: StrictInt | None = None
    count: StrictInt | None = None


class CheckpointRequest(Strict):
    """``POST /sandboxes/{id}/checkpoints`` (Bac)."""

    name: Name | None = None
    memory: StrictBool | None = None


class ScheduleRequest(Strict):
    """``PUT /sandboxes/{id}/checkpoints/schedule`` (Bac): null interval stops it."""

    intervalSeconds: StrictInt | None = None
    keep: StrictInt | None = None
