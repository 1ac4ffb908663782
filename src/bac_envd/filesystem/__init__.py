"""Filesystem operations behind the ``filesystem.Filesystem`` Connect service.

Error tree (domain, mapped to Connect codes in ``_service``)::

    FsError                                                       RPC code / HTTP status
    ├── FsNotFound        path (or watcher) does not exist        not_found / 404
    ├── FsAlreadyExists   MakeDir on an existing directory        already_exists / 409
    ├── FsInvalid         wrong kind of path, too long, a loop    invalid_argument / 400
    ├── FsDenied          read-only mount, permission             permission_denied / 403
    ├── FsNoSpace         disk or quota full                      resource_exhausted / 507
    └── FsFailed          any other OS error                      internal / 500

``from_os`` turns an OS error into the one it means (by errno).
"""

from bac_envd.filesystem._entry import Entry, FileKind, entry_info, go_file_mode
from bac_envd.filesystem._errors import (
    FsAlreadyExists,
    FsDenied,
    FsError,
    FsFailed,
    FsInvalid,
    FsNoSpace,
    FsNotFound,
    from_os,
)

__all__ = [
    "Entry",
    "FileKind",
    "FsAlreadyExists",
    "FsDenied",
    "FsError",
    "FsFailed",
    "FsInvalid",
    "FsNoSpace",
    "FsNotFound",
    "entry_info",
    "from_os",
    "go_file_mode",
]
