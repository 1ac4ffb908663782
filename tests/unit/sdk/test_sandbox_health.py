"""The SDK reads Bac's ``health`` of a sandbox: unhealthy when the server says so, healthy
when it says nothing (an E2B server, an older Bac); the CLI's JSON carries it."""

from __future__ import annotations

from typing import Any

from bac import SandboxHealth, SandboxInfo, SandboxState

_LISTED: dict[str, Any] = {
    "templateID": "base", "sandboxID": "s1", "clientID": "c", "startedAt":
    "2026-01-01T00:00:00Z", "endAt": "2026-01-01T00:05:00Z", "envdVersion": "0.6.13",
    "cpuCount": 2, "memoryMB": 512, "diskSizeMB": 1024, "state": "running"}


def test_health_is_read_and_defaults_to_healthy() -> None:
    silent = SandboxInfo.from_api({**_LISTED, "health": "unhealthy"})
    assert silent.health is SandboxHealth.UNHEALTHY and silent.state is SandboxState.RUNNING
    assert silent.to_json()["health"] == "unhealthy"
    assert SandboxInfo.from_api(_LISTED).health is SandboxHealth.HEALTHY
