"""Uploaded build contexts: the files a template's COPY steps copy from.

The official SDK asks ``GET /templates/{id}/files/{hash}`` whether a context is cached and,
when not, PUTs a tar (gzipped or not) to the URL it was given, with no API key. That URL
carries a short-lived token signed with a key only this process knows (HMAC over template,
hash and expiry), so only a client the API answered can upload, and only that hash.

Contexts are cached per team, keyed by the SDK's files hash (which covers the files' paths,
modes and contents): any of the team's templates reuses them. Each is streamed to a temporary
file beside its final place (never held in memory), size-limited, fsynced, then renamed in:
a reader never sees half a file, and an interrupted upload leaves nothing behind.

The quota: a team's uploads together may use ``limit_bytes`` (``UploadQuota``); an upload
that would go beyond fails with ``UploadQuotaExceeded`` (507), naming the limit and what
is in use. A new upload of a hash the team has already replaces the old one, which does
not count. Unused uploads expire (``control.gc``).

Layout::

    <data_dir>/template-uploads/       0700 root
        <team key>/<files hash>.tar    team key: sha256 of the team id (ids are free text)
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import hmac
import os
import re
import secrets
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

from bac_server.store import UploadRecord, UploadStore

from ..errors import InvalidRequest, QuotaExceeded, Unauthenticated

TOKEN_TTL_S = 3600  # the SDK uploads right after asking; an hour covers a slow link
_HASH = re.compile(r"^[0-9a-f]{16,128}$")


class UploadTooLarge(InvalidRequest):
    """The upload is larger than the server accepts (the message names the limit)."""


class UploadQuotaExceeded(QuotaExceeded):
    """The team's uploaded build contexts would use more than its quota (507)."""


def check_hash(files_hash: str) -> str:
    if not _HASH.match(files_hash):
        raise InvalidRequest(f"files hash {files_hash[:80]!r} is not a lowercase hex digest")
    return files_hash


class UploadQuota:
    def __init__(self, upload_store: UploadStore, limit_bytes: int) -> None:
        self._upload_store = upload_store
        self.limit_bytes = limit_bytes

    async def allowance(self, team_id: str, files_hash: str) -> int:
        """Bytes the team may still upload under ``files_hash``."""
        used = await self._upload_store.upload_bytes(team_id)
        replaced = await self._upload_store.get_upload(team_id, files_hash)
        if replaced is not None:
            used -= replaced.size_bytes
        return max(0, self.limit_bytes - used)

    def refuse(self, team_id: str, allowance: int) -> UploadQuotaExceeded:
        used = self.limit_bytes - allowance
        return UploadQuotaExceeded(
            f"the build contexts uploaded by team {team_id!r} would exceed its quota of "
            f"{_mib(self.limit_bytes)} ({_mib(used)} in use): unused ones are deleted "
            "after a while, or ask the server's operator for more (BAC_UPLOAD_QUOTA_MB)")


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.0f} MiB"


class Uploads:
    def __init__(self, root: Path, upload_store: UploadStore, *, max_bytes: int,
                 quota: UploadQuota | None = None, key: bytes | None = None) -> None:
        self.root = root
        self._upload_store = upload_store
        self.max_bytes = max_bytes
        self._quota = quota  # per team; None: no quota
        self._key = key or secrets.token_bytes(32)

    def _team_dir(self, team_id: str) -> Path:
        return self.root / hashlib.sha256(team_id.encode()).hexdigest()[:32]

    async def path(self, team_id: str, files_hash: str) -> Path | None:
        """The stored context, if the team uploaded it and it is still on disk."""
        found = await self._upload_store.get_upload(team_id, files_hash)
        if found is None or not await asyncio.to_thread(_touch, Path(found.path)):
            return None
        return Path(found.path)

    # signed upload URLs -------------------------------------------------------------------
    def _mac(self, template_id: str, files_hash: str, expires: int) -> str:
        message = f"{template_id}\n{files_hash}\n{expires}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def sign(self, template_id: str, files_hash: str) -> str:
        expires = int(time.time()) + TOKEN_TTL_S
        return f"{expires}.{self._mac(template_id, files_hash, expires)}"

    def verify(self, template_id: str, files_hash: str, token: str | None) -> None:
        """Raise ``Unauthenticated`` unless ``token`` was signed here for exactly this
        template and hash and has not expired."""
        expires_text, _, mac = (token or "").partition(".")
        if not expires_text.isdigit() or not mac:
            raise Unauthenticated("upload URL is missing its token; ask for a new one")
        expires = int(expires_text)
        # SECURITY: constant-time comparison; the MAC binds template, hash and expiry.
        if not hmac.compare_digest(mac, self._mac(template_id, files_hash, expires)):
            raise Unauthenticated("upload URL token is invalid; ask for a new one")
        if expires < time.time():
            raise Unauthenticated("upload URL has expired; ask for a new one")

    # receiving ----------------------------------------------------------------------------
    async def receive(self, team_id: str, files_hash: str, chunks: AsyncIterator[bytes],
                      declared: int | None = None) -> UploadRecord:
        """Stream ``chunks`` to the team's cache under ``files_hash``, atomically."""
        check_hash(files_hash)
        if declared is not None and declared > self.max_bytes:
            raise UploadTooLarge(self._too_large())
        quota = self._quota
        allowance = None if quota is None else await quota.allowance(team_id, files_hash)
        if quota is not None and allowance is not None and (declared or 0) > allowance:
            raise quota.refuse(team_id, allowance)
        folder = self._team_dir(team_id)
        await asyncio.to_thread(_make_dirs, self.root, folder)
        final = folder / f"{files_hash}.tar"
        partial = folder / f".{files_hash}.{secrets.token_hex(6)}.partial"
        size = 0
        fd = await asyncio.to_thread(os.open, partial,
                                     os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            async for chunk in chunks:
                size += len(chunk)
                if size > self.max_bytes:
                    raise UploadTooLarge(self._too_large())
                if quota is not None and allowance is not None and size > allowance:
                    raise quota.refuse(team_id, allowance)
                await asyncio.to_thread(_write_all, fd, chunk)
            if declared is not None and size != declared:
                raise InvalidRequest(f"upload ended after {size} of {declared} bytes")
            await asyncio.to_thread(os.fsync, fd)
        except BaseException as exc:
            os.close(fd)
            partial.unlink(missing_ok=True)
            if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
                raise QuotaExceeded("the server's disk is full; the upload was dropped") from exc
            raise
        os.close(fd)
        await asyncio.to_thread(os.replace, partial, final)
        record = UploadRecord(team_id=team_id, files_hash=files_hash, path=str(final),
                              size_bytes=size, created_at=datetime.now(UTC))
        await self._upload_store.add_upload(record)
        return record

    def _too_large(self) -> str:
        return f"upload is larger than the limit of {self.max_bytes} bytes"


def _make_dirs(root: Path, folder: Path) -> None:
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.mkdir(mode=0o700, exist_ok=True)


def _touch(path: Path) -> bool:
    """Note a use of the upload (its expiry counts from the last one); False if gone."""
    try:
        os.utime(path)
    except FileNotFoundError:
        return False
    return path.is_file()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
