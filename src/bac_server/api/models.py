"""Request bodies as strict pydantic models, keys exactly as on the wire.

Strict: no coercion (``"60"`` is not a timeout, ``true`` is not a count). Unknown keys are
rejected: these models list every key an official SDK sends, so an unknown one is a client
bug worth reporting. ``cpuCount`` and ``memoryMB`` on create are Bac extensions.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _Open(BaseModel):
    # Nested configuration objects newer SDKs may grow keys in; kept as given.
    model_config = ConfigDict(extra="allow", strict=True)


Name = Annotated[StrictStr, Field(min_length=1, max_length=255)]


class AutoResume(_Strict):
    enabled: StrictBool


class VolumeMount(_Strict):
    name: StrictStr
    path: StrictStr


class NetworkConfig(_Strict):
    allowPublicTraffic: StrictBool | None = None
    allowOut: list[StrictStr] | None = None
    denyOut: list[StrictStr] | None = None
    dnsServers: list[StrictStr] | None = None
    egressProxy: dict[str, Any] | None = None
    maskRequestHost: StrictStr | None = None
    httpsPorts: list[StrictInt] | None = None
    rules: dict[str, Any] | None = None


class NetworkUpdateBody(_Strict):
    """``PUT /sandboxes/{id}/network``: replaces the egress configuration."""

    allowOut: list[StrictStr] | None = None
    denyOut: list[StrictStr] | None = None
    dnsServers: list[StrictStr] | None = None
    egressProxy: dict[str, Any] | None = None
    rules: dict[str, Any] | None = None
    allow_internet_access: StrictBool | None = None


class NewSandbox(_Strict):
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
    iam: _Open | None = None
    volumeMounts: list[VolumeMount] | None = None
    cpuCount: StrictInt | None = None
    memoryMB: StrictInt | None = None


class ConnectSandbox(_Strict):
    timeout: StrictInt | None = None
    memory: StrictBool | None = None


class ConnectSandboxV1(_Strict):
    timeout: StrictInt
    memory: StrictBool | None = None


class TimeoutRequest(_Strict):
    timeout: StrictInt


class RefreshRequest(_Strict):
    duration: StrictInt | None = None


class PauseRequest(_Strict):
    memory: StrictBool | None = None
    requireHealthyGuest: StrictBool | None = None


class ResumeRequest(_Strict):
    timeout: StrictInt | None = None
    autoPause: StrictBool | None = None
    memory: StrictBool | None = None


class SnapshotRequest(_Strict):
    """``POST /sandboxes/{id}/snapshots`` (E2B)."""

    name: Name | None = None
    memory: StrictBool | None = None


class ForkRequest(_Strict):
    """``POST /sandboxes/{id}/fork`` (E2B)."""

    timeout: StrictInt | None = None
    count: StrictInt | None = None


class CheckpointRequest(_Strict):
    """``POST /sandboxes/{id}/checkpoints`` (Bac)."""

    name: Name | None = None
    memory: StrictBool | None = None


class ScheduleRequest(_Strict):
    """``PUT /sandboxes/{id}/checkpoints/schedule`` (Bac): null interval stops it."""

    intervalSeconds: StrictInt | None = None
    keep: StrictInt | None = None
