"""Domain ↔ wire: ``Entry`` → ``EntryInfo``, ``FsError`` → ``ConnectError``."""

from __future__ import annotations

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from protobuf.wkt.google.protobuf.timestamp_pb import Timestamp

from bac_envd.filesystem._entry import Entry, FileKind
from bac_envd.filesystem._errors import (
    FsAlreadyExists,
    FsDenied,
    FsError,
    FsInvalid,
    FsNoSpace,
    FsNotFound,
)
from bac_protocol.envd import filesystem_pb as pb

_KINDS = {
    FileKind.UNKNOWN: pb.FileType.UNSPECIFIED,
    FileKind.FILE: pb.FileType.FILE,
    FileKind.DIRECTORY: pb.FileType.DIRECTORY,
}
_CODES: list[tuple[type[FsError], Code]] = [
    (FsNotFound, Code.NOT_FOUND),
    (FsAlreadyExists, Code.ALREADY_EXISTS),
    (FsInvalid, Code.INVALID_ARGUMENT),
    (FsDenied, Code.PERMISSION_DENIED),
    (FsNoSpace, Code.RESOURCE_EXHAUSTED),
]


def to_connect(exc: FsError) -> ConnectError:
    for cls, code in _CODES:
        if isinstance(exc, cls):
            return ConnectError(code, str(exc))
    return ConnectError(Code.INTERNAL, str(exc))


def to_entry_info(entry: Entry) -> pb.EntryInfo:
    seconds, nanos = divmod(entry.mtime_ns, 1_000_000_000)
    return pb.EntryInfo(
        name=entry.name,
        type=_KINDS[entry.kind],
        path=entry.path,
        size=entry.size,
        mode=entry.mode,
        permissions=entry.permissions,
        owner=entry.owner,
        group=entry.group,
        modified_time=Timestamp(seconds=seconds, nanos=nanos),
        symlink_target=entry.symlink_target,
        metadata=entry.metadata,
        # is_symlink stays false: the e2b SDK tests expect a symlink to a file to be
        # reported as FILE (see e2b-protocol §4.4).
    )
