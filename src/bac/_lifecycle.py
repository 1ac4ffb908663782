"""A sandbox's lifetime on the wire: what its timeout does (``Lifecycle``, sent at create),
and the calls on one sandbox by id: kill, set the timeout, describe.

Shared by the class spellings (``AsyncSandbox.kill(sandbox_id)``) and the instance ones
(``await sandbox.kill()``), which differ only in where the API client comes from.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from bac import _errors as e
from bac._api import ApiClient
from bac._config import whole_seconds
from bac._models import SandboxInfo


class Lifecycle(TypedDict, total=False):
    """What happens at the timeout: ``on_timeout="pause"`` pauses instead of killing
    (``keep_memory=False``: files only), ``auto_resume`` resumes a paused sandbox on the next
    call to it. The idle policy (Bac): after ``idle_after`` seconds with no API or gateway
    traffic and its CPU under ``idle_cpu_below_pct`` %, ``idle_action`` (pause by default;
    ``idle_after=0``: never); each left out is the server's default."""

    on_timeout: Literal["kill", "pause"]
    keep_memory: bool
    auto_resume: bool
    idle_after: int
    idle_cpu_below_pct: float
    idle_action: Literal["pause", "kill"]


def lifecycle_body(lifecycle: Lifecycle | None) -> dict[str, Any]:
    """The create request's fields for ``lifecycle``."""
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
    idle = {wire: lifecycle[key] for key, wire in _IDLE_FIELDS.items()  # type: ignore[literal-required]
            if key in lifecycle}
    if idle:
        body["idle"] = idle
    return body


_IDLE_FIELDS = {"idle_after": "after", "idle_cpu_below_pct": "cpuBelowPct",
                "idle_action": "action"}


def sandbox_path(sandbox_id: str, suffix: str = "") -> str:
    if not (sandbox_id.isascii() and sandbox_id.isalnum()):
        raise e.InvalidArgumentError(f"invalid sandbox id {sandbox_id!r}")
    return f"/sandboxes/{sandbox_id}{suffix}"


async def kill(api: ApiClient, sandbox_id: str, request_timeout: float | None) -> bool:
    try:
        await api.request(
            "DELETE", sandbox_path(sandbox_id), ok=(200, 204),
            not_found=e.SandboxNotFoundError, request_timeout=request_timeout,
        )
    except e.SandboxNotFoundError:
        return False
    return True


async def set_timeout(
    api: ApiClient, sandbox_id: str, lifetime: int, request_timeout: float | None
) -> None:
    await api.request(
        "POST", sandbox_path(sandbox_id, "/timeout"), json={"timeout": whole_seconds(lifetime)},
        ok=(200, 204), not_found=e.SandboxNotFoundError, request_timeout=request_timeout,
    )


async def get_info(api: ApiClient, sandbox_id: str, request_timeout: float | None) -> SandboxInfo:
    data = await api.json(
        "GET", sandbox_path(sandbox_id), not_found=e.SandboxNotFoundError,
        request_timeout=request_timeout,
    )
    return SandboxInfo.from_api(data)
