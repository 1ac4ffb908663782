"""``Artefacts`` and ``SandboxArtefacts``: the blocking twins of :class:`AsyncArtefacts`
and :class:`AsyncSandboxArtefacts`, method for method."""

from __future__ import annotations

import builtins
import os
from pathlib import Path
from typing import Unpack

from bac._artefacts import Artefact, AsyncArtefacts, AsyncSandboxArtefacts
from bac._config import ConnectionOpts
from bac._portal import PORTAL


class SandboxArtefacts:
    """Blocking twin of :class:`AsyncSandboxArtefacts` (``Sandbox.artefacts``)."""

    def __init__(self, inner: AsyncSandboxArtefacts) -> None:
        self._inner = inner

    def promote(self, path: str, name: str, *, run_id: str) -> Artefact:
        """See :meth:`AsyncSandboxArtefacts.promote`."""
        return PORTAL.run(self._inner.promote(path, name, run_id=run_id))

    def list(self, run_id: str) -> builtins.list[Artefact]:
        return PORTAL.run(self._inner.list(run_id))

    def download(self, run_id: str, name: str) -> bytes:
        return PORTAL.run(self._inner.download(run_id, name))

    def delete(self, run_id: str, name: str) -> None:
        PORTAL.run(self._inner.delete(run_id, name))


async def _make(opts: ConnectionOpts) -> AsyncArtefacts:
    return AsyncArtefacts(**opts)


class Artefacts:
    """A team's artefacts, with blocking calls; see :class:`AsyncArtefacts`.

    ::

        with Artefacts() as artefacts:
            data = artefacts.download("run-42", "report.json")
    """

    def __init__(self, **opts: Unpack[ConnectionOpts]) -> None:
        # Made on the portal's loop, which is where its connection pool will be used.
        self._inner = PORTAL.run(_make(opts))

    def close(self) -> None:
        PORTAL.run(self._inner.aclose())

    def __enter__(self) -> Artefacts:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def promote(self, sandbox_id: str, path: str, name: str, *, run_id: str) -> Artefact:
        return PORTAL.run(self._inner.promote(sandbox_id, path, name, run_id=run_id))

    def list(self, run_id: str) -> builtins.list[Artefact]:
        return PORTAL.run(self._inner.list(run_id))

    def download(self, run_id: str, name: str) -> bytes:
        return PORTAL.run(self._inner.download(run_id, name))

    def download_to(self, run_id: str, name: str, dest: str | os.PathLike[str]) -> Path:
        return PORTAL.run(self._inner.download_to(run_id, name, dest))

    def delete(self, run_id: str, name: str) -> None:
        PORTAL.run(self._inner.delete(run_id, name))
