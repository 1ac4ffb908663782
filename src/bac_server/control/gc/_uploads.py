"""Uploaded build contexts: expiry of unused ones.

An upload is *used* when the API answers that it is cached and when a build copies from
it (``Uploads.path`` touches its file), so its last use is the later of its row's time
and its file's modification time. One unused for ``ttl_s`` is deleted, row and file,
unless a build that has not finished names it in a COPY step. Files no row names (a
crash between the file and its row) go once they are older than ``orphan_s``; unfinished
``.partial`` files of interrupted uploads once they are a day old.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path

from bac_server.store import BuildStore, UploadRecord, UploadStore

from ..templates import UNFINISHED

PARTIAL_MAX_AGE_S = 86_400.0


@dataclass(frozen=True)
class ExpiredUpload:
    team_id: str
    files_hash: str
    size: int
    unused_s: float


def _last_use(upload: UploadRecord) -> float:
    try:
        touched = os.stat(upload.path).st_mtime
    except OSError:
        touched = 0.0
    return max(upload.created_at.timestamp(), touched)


async def expire_uploads(upload_store: UploadStore, build_store: BuildStore, root: Path, *,
                         ttl_s: float, orphan_s: float, dry_run: bool) -> list[ExpiredUpload]:
    """Delete (or, dry run, list) the uploads unused for ``ttl_s``; also orphaned files."""
    busy = await _in_use(build_store)
    now = time.time()
    expired: list[ExpiredUpload] = []
    rows = await upload_store.all_uploads()
    for upload in rows:
        unused = now - await asyncio.to_thread(_last_use, upload)
        if unused < ttl_s or (upload.team_id, upload.files_hash) in busy:
            continue
        if not dry_run:
            if not await upload_store.delete_upload(upload.team_id, upload.files_hash,
                                             upload.created_at):
                continue  # uploaded again meanwhile: the new one stays
            if await upload_store.get_upload(upload.team_id, upload.files_hash) is None:
                await asyncio.to_thread(Path(upload.path).unlink, missing_ok=True)
        expired.append(ExpiredUpload(upload.team_id, upload.files_hash, upload.size_bytes,
                                     unused))
    if not dry_run:
        named = {upload.path for upload in rows}
        await asyncio.to_thread(_sweep_orphans, root, named, orphan_s)
    return expired


async def _in_use(build_store: BuildStore) -> set[tuple[str, str]]:
    """(team, files hash) of every COPY step of a build that has not finished."""
    found: set[tuple[str, str]] = set()
    for build in await build_store.builds_in_states([s.value for s in UNFINISHED]):
        for step in (build.recipe or {}).get("steps") or []:
            if isinstance(step, dict) and step.get("files_hash"):
                found.add((build.team_id, str(step["files_hash"])))
    return found


def _sweep_orphans(root: Path, named: set[str], orphan_s: float) -> None:
    now = time.time()
    for team in root.iterdir() if root.is_dir() else []:
        for path in team.iterdir() if team.is_dir() else []:
            try:
                age = now - path.stat().st_mtime
            except FileNotFoundError:
                continue
            partial = path.name.endswith(".partial")
            if (partial and age > PARTIAL_MAX_AGE_S) or (
                    not partial and str(path) not in named and age > orphan_s):
                path.unlink(missing_ok=True)
