"""Artefacts (Bac's own): a sandbox's file or directory promoted into durable storage on
the server under a run id and a name, kept after the sandbox ends.

Promotion is idempotent: the same bytes promoted again under a name return the artefact
already kept (``created`` False); other bytes under it raise
:class:`~bac.ArtefactConflictError`. A directory is kept as a tar of its tree (names
sorted, owners and times zeroed, so the same tree gives the same sha256).

``sandbox.artefacts`` promotes from that sandbox; :class:`AsyncArtefacts` (a team's, from
its API key) lists, downloads and deletes without one, and promotes from any of its
sandboxes.
"""

from __future__ import annotations

import asyncio
import builtins
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Unpack
from urllib.parse import quote

from bac import _errors as e
from bac._api import ApiClient
from bac._config import ConnectionConfig, ConnectionOpts
from bac._lifecycle import sandbox_path
from bac._models import parse_time

ArtefactKind = Literal["file", "directory"]


@dataclass(frozen=True)
class Artefact:
    """A promoted file or directory (``kind``), the bytes kept (a directory's tar)
    identified by ``sha256``. ``created``: from a promotion, whether it made the artefact
    (False: the same bytes were promoted under this name before); None when listed."""

    run_id: str
    name: str
    sha256: str
    size_bytes: int
    kind: ArtefactKind
    sandbox_id: str  # the sandbox it was promoted from
    path: str  # its path there
    created_at: datetime
    created: bool | None = None

    @classmethod
    def from_api(cls, data: dict[str, Any], created: bool | None = None) -> Artefact:
        try:
            kind = data["kind"]
            if kind not in ("file", "directory"):
                raise ValueError(f"unknown kind {kind!r}")
            return cls(str(data["runId"]), str(data["name"]), str(data["sha256"]),
                       int(data["sizeBytes"]), kind, str(data["sandboxID"]),
                       str(data["path"]), parse_time(data["createdAt"], "createdAt"), created)
        except (KeyError, TypeError, ValueError) as exc:
            raise e.ServerError(f"server sent an incomplete artefact: {exc}") from exc

    def to_json(self) -> dict[str, Any]:
        found = {"runId": self.run_id, "name": self.name, "sha256": self.sha256,
                 "sizeBytes": self.size_bytes, "kind": self.kind, "sandboxId": self.sandbox_id,
                 "path": self.path, "createdAt": self.created_at.isoformat()}
        if self.created is not None:
            found["created"] = self.created
        return found


def _path(run_id: str, name: str) -> str:
    if not run_id or not name:
        raise e.InvalidArgumentError("an artefact is named by a run id and a name")
    return f"/artefacts/{quote(run_id, safe='')}/{quote(name, safe='')}"


async def promote(api: ApiClient, sandbox_id: str, path: str, name: str, *,
                  run_id: str) -> Artefact:
    try:
        response = await api.request(
            "POST", sandbox_path(sandbox_id, "/artefacts"),
            json={"path": path, "name": name, "runId": run_id}, ok=(200, 201))
    except e.AlreadyExistsError as exc:
        # A 409 is other bytes under the name, or a sandbox not running (paused).
        if "other content" not in exc.message:
            raise
        raise e.ArtefactConflictError(exc.message, status_code=exc.status_code) from exc
    except e.NotFoundError as exc:
        # The server names what it did not find: the path in the sandbox, or the sandbox.
        cls = e.PathNotFoundError if "not found in sandbox" in exc.message \
            else e.SandboxNotFoundError
        raise cls(exc.message, status_code=exc.status_code) from exc
    try:
        data = response.json()
    except ValueError as exc:
        raise e.ServerError("the server sent a non-JSON artefact") from exc
    return Artefact.from_api(data, created=response.status_code == 201)


async def listing(api: ApiClient, run_id: str) -> builtins.list[Artefact]:
    if not run_id:
        raise e.InvalidArgumentError("run_id is required")
    data = await api.json("GET", "/artefacts", params={"runId": run_id})
    if not isinstance(data, list):
        raise e.ServerError("the server sent an artefact list that is not a list")
    return [Artefact.from_api(a) for a in data]


async def download(api: ApiClient, run_id: str, name: str) -> bytes:
    async with api.stream("GET", _path(run_id, name),
                          not_found=e.ArtefactNotFoundError) as response:
        return await response.aread()


async def download_to(api: ApiClient, run_id: str, name: str, dest: str | os.PathLike[str],
                      ) -> Path:
    """Write the bytes to ``dest`` as they come (through a file beside it, renamed once
    whole: ``dest`` never holds part of them); returns ``dest``."""
    target = Path(dest)
    partial = target.with_name(f".{target.name}.partial")
    try:
        async with api.stream("GET", _path(run_id, name),
                              not_found=e.ArtefactNotFoundError) as response:
            with partial.open("wb") as sink:
                async for chunk in response.aiter_bytes():
                    await asyncio.to_thread(sink.write, chunk)
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target


async def delete(api: ApiClient, run_id: str, name: str) -> None:
    await api.request("DELETE", _path(run_id, name), ok=(204,),
                      not_found=e.ArtefactNotFoundError)


class AsyncSandboxArtefacts:
    """``sandbox.artefacts``: promote this sandbox's files and directories; list,
    download and delete a run's artefacts."""

    def __init__(self, api: ApiClient, sandbox_id: str) -> None:
        self._api = api
        self._sandbox_id = sandbox_id

    async def promote(self, path: str, name: str, *, run_id: str) -> Artefact:
        """Copy ``path`` (a file, or a directory as a tar) out of the sandbox into the
        run's artefacts as ``name``. The same bytes again: the artefact already kept
        (``created`` False); other bytes: ``ArtefactConflictError``; past the team's
        quota: ``NotEnoughSpaceError``; no such path: ``PathNotFoundError``."""
        return await promote(self._api, self._sandbox_id, path, name, run_id=run_id)

    async def list(self, run_id: str) -> builtins.list[Artefact]:
        """The run's artefacts, oldest first."""
        return await listing(self._api, run_id)

    async def download(self, run_id: str, name: str) -> bytes:
        """The artefact's bytes (a directory's tar)."""
        return await download(self._api, run_id, name)

    async def delete(self, run_id: str, name: str) -> None:
        await delete(self._api, run_id, name)


class AsyncArtefacts:
    """The artefacts of one team (its API key) on one Bac server, without a sandbox.

    ::

        async with AsyncArtefacts() as artefacts:
            for a in await artefacts.list("run-42"):
                print(a.name, a.sha256)
    """

    def __init__(self, **opts: Unpack[ConnectionOpts]) -> None:
        self._api = ApiClient(ConnectionConfig.resolve(**opts))

    async def aclose(self) -> None:
        await self._api.aclose()

    async def __aenter__(self) -> AsyncArtefacts:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def promote(self, sandbox_id: str, path: str, name: str, *,
                      run_id: str) -> Artefact:
        """See :meth:`AsyncSandboxArtefacts.promote`."""
        return await promote(self._api, sandbox_id, path, name, run_id=run_id)

    async def list(self, run_id: str) -> builtins.list[Artefact]:
        """The run's artefacts, oldest first."""
        return await listing(self._api, run_id)

    async def download(self, run_id: str, name: str) -> bytes:
        return await download(self._api, run_id, name)

    async def download_to(self, run_id: str, name: str,
                          dest: str | os.PathLike[str]) -> Path:
        """Stream the bytes to the file ``dest`` (whole or not at all); returns it."""
        return await download_to(self._api, run_id, name, dest)

    async def delete(self, run_id: str, name: str) -> None:
        """Delete it (``ArtefactNotFoundError`` when there is none)."""
        await delete(self._api, run_id, name)
