"""The HTTP status a failed file operation of ``/files`` answers: the filesystem error it
means (``filesystem.from_os``) as a status, 4xx where the client can fix it (a path the
kernel refuses, a read-only place, a missing path, a full disk as E2B envd's 507)."""

from __future__ import annotations

from bac_envd.filesystem._errors import (
    FsAlreadyExists,
    FsDenied,
    FsError,
    FsInvalid,
    FsNoSpace,
    FsNotFound,
    from_os,
)

NO_SPACE = 507
_STATUS: dict[type[FsError], int] = {
    FsNotFound: 404,
    FsAlreadyExists: 409,
    FsInvalid: 400,
    FsDenied: 403,
    FsNoSpace: NO_SPACE,
}


def status_of(error: FsError) -> int:
    return _STATUS.get(type(error), 500)


def os_status(exc: OSError) -> int:
    return status_of(from_os(str(exc), exc))
