"""REST calls that save and bring back sandbox state: pause, resume, checkpoints,
snapshots and forks, and what they answer (``Checkpoint``, ``SnapshotInfo``).

Pausing keeps a sandbox's processes, memory and files on the server's disk (or only its
files with ``memory=False``); a paused sandbox never expires and is resumed by
``connect``/``resume`` (or by any call to it, when created with ``auto_resume``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from bac import _errors as e
from bac._api import ApiClient
from bac._lifecycle import sandbox_path
from bac._models import parse_time


@dataclass(frozen=True)
class Checkpoint:
    """A saved state of a sandbox (files, and processes with their memory if ``memory``)."""

    checkpoint_id: str
    sandbox_id: str
    name: str | None
    created_at: datetime
    size_bytes: int  # disk it uses on the server
    memory: bool

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Checkpoint:
        try:
            return cls(str(data["checkpointID"]), str(data["sandboxID"]), data.get("name"),
                       parse_time(data["createdAt"], "createdAt"), int(data["sizeBytes"]),
                       bool(data["memory"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise e.ServerError(f"server sent an incomplete checkpoint: {exc}") from exc

    def to_json(self) -> dict[str, Any]:
        return {"checkpointId": self.checkpoint_id, "sandboxId": self.sandbox_id,
                "name": self.name, "createdAt": self.created_at.isoformat(),
                "sizeBytes": self.size_bytes, "memory": self.memory}


@dataclass(frozen=True)
class SnapshotInfo:
    """A snapshot: ``AsyncSandbox.create(snapshot_id)`` starts a sandbox from it."""

    snapshot_id: str
    names: list[str]
    size_bytes: int | None = None

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> SnapshotInfo:
        try:
            return cls(str(data["snapshotID"]), [str(n) for n in data["names"]],
                       data.get("sizeBytes"))
        except (KeyError, TypeError) as exc:
            raise e.ServerError(f"server sent an incomplete snapshot: {exc}") from exc

    def to_json(self) -> dict[str, Any]:
        return {"snapshotId": self.snapshot_id, "names": self.names,
                "sizeBytes": self.size_bytes}


async def pause(api: ApiClient, sandbox_id: str, memory: bool) -> bool:
    """False when the sandbox was already paused."""
    try:
        await api.request("POST", sandbox_path(sandbox_id, "/pause"),
                          json={} if memory else {"memory": False}, ok=(200, 204),
                          not_found=e.SandboxNotFoundError)
    except e.AlreadyExistsError:
        return False
    return True


async def connect(api: ApiClient, sandbox_id: str, timeout: int | None,  # noqa: ASYNC109 - sandbox lifetime
                  memory: bool = True) -> Any:
    body: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    if not memory:
        body["memory"] = False
    return await api.json("POST", "/v2" + sandbox_path(sandbox_id, "/connect"), json=body,
                          ok=(200, 201), not_found=e.SandboxNotFoundError)


async def checkpoint(api: ApiClient, sandbox_id: str, name: str | None,
                     memory: bool) -> Checkpoint:
    body: dict[str, Any] = {"memory": memory}
    if name is not None:
        body["name"] = name
    data = await api.json("POST", sandbox_path(sandbox_id, "/checkpoints"), json=body,
                          ok=(201,), not_found=e.SandboxNotFoundError)
    return Checkpoint.from_api(data)


async def checkpoints(api: ApiClient, sandbox_id: str) -> list[Checkpoint]:
    data = await api.json("GET", sandbox_path(sandbox_id, "/checkpoints"),
                          not_found=e.SandboxNotFoundError)
    return [Checkpoint.from_api(item) for item in data]


def _checkpoint_path(sandbox_id: str, checkpoint_id: str, suffix: str = "") -> str:
    if not checkpoint_id or "/" in checkpoint_id:
        raise e.InvalidArgumentError(f"invalid checkpoint id {checkpoint_id!r}")
    return sandbox_path(sandbox_id, f"/checkpoints/{quote(checkpoint_id, safe='')}{suffix}")


async def resolve(api: ApiClient, sandbox_id: str, checkpoint: Checkpoint | str) -> str:
    """The id of ``checkpoint``: a checkpoint, its id, or the name it was taken with.

    Names live with the checkpoints on the server, which routes by id only; a name is
    looked up in the sandbox's list. A name several checkpoints share is refused rather
    than guessed: rolling back to the wrong one would lose work."""
    if isinstance(checkpoint, Checkpoint):
        return checkpoint.checkpoint_id
    found = await checkpoints(api, sandbox_id)
    if any(c.checkpoint_id == checkpoint for c in found):
        return checkpoint
    named = [c.checkpoint_id for c in found if c.name == checkpoint]
    if len(named) == 1:
        return named[0]
    if named:
        raise e.InvalidArgumentError(
            f"{len(named)} checkpoints of sandbox {sandbox_id!r} are named {checkpoint!r} "
            f"({', '.join(named)}); give one by its id")
    raise e.NotFoundError(
        f"sandbox {sandbox_id!r} has no checkpoint with the id or name {checkpoint!r}")


async def restore(api: ApiClient, sandbox_id: str, checkpoint: Checkpoint | str) -> None:
    checkpoint_id = await resolve(api, sandbox_id, checkpoint)
    await api.request("POST", _checkpoint_path(sandbox_id, checkpoint_id, "/restore"),
                      json={}, ok=(200,))


async def delete_checkpoint(api: ApiClient, sandbox_id: str, checkpoint: Checkpoint | str) -> bool:
    try:
        checkpoint_id = await resolve(api, sandbox_id, checkpoint)
        await api.request("DELETE", _checkpoint_path(sandbox_id, checkpoint_id), ok=(204,))
    except e.NotFoundError:
        return False
    return True


async def schedule(api: ApiClient, sandbox_id: str, every_s: int | None,
                   keep: int | None) -> None:
    await api.request("PUT", sandbox_path(sandbox_id, "/checkpoints/schedule"),
                      json={"intervalSeconds": every_s, "keep": keep}, ok=(204,),
                      not_found=e.SandboxNotFoundError)


async def snapshot(api: ApiClient, sandbox_id: str, name: str | None,
                   memory: bool) -> SnapshotInfo:
    body: dict[str, Any] = {} if memory else {"memory": False}
    if name is not None:
        body["name"] = name
    data = await api.json("POST", sandbox_path(sandbox_id, "/snapshots"), json=body,
                          ok=(201,), not_found=e.SandboxNotFoundError)
    return SnapshotInfo.from_api(data)


async def snapshots(api: ApiClient, sandbox_id: str | None) -> list[SnapshotInfo]:
    found: list[SnapshotInfo] = []
    params: dict[str, str] = {} if sandbox_id is None else {"sandboxID": sandbox_id}
    while True:
        response = await api.request("GET", "/snapshots", params=params)
        found += [SnapshotInfo.from_api(item) for item in response.json()]
        token = response.headers.get("x-next-token")
        if not token:
            return found
        params = {**params, "nextToken": token}


async def delete_snapshot(api: ApiClient, snapshot_id: str) -> bool:
    try:
        await api.request("DELETE", "/templates/" + quote(snapshot_id, safe=""), ok=(204,))
    except e.NotFoundError:
        return False
    return True


async def fork(api: ApiClient, sandbox_id: str, count: int,
               timeout: int | None  # noqa: ASYNC109 - lifetime of the forks
               ) -> list[dict[str, Any] | e.SandboxError]:
    """One created sandbox (its API description) or error per fork."""
    body: dict[str, Any] = {"count": count}
    if timeout is not None:
        body["timeout"] = timeout
    data = await api.json("POST", sandbox_path(sandbox_id, "/fork"), json=body, ok=(201,),
                          not_found=e.SandboxNotFoundError)
    out: list[dict[str, Any] | e.SandboxError] = []
    for item in data:
        if isinstance(item.get("sandbox"), dict):
            out.append(item["sandbox"])
        else:
            problem = item.get("error") or {}
            out.append(e.ServerError(f"{problem.get('code')}: {problem.get('message')}",
                                     status_code=problem.get("code")))
    return out
