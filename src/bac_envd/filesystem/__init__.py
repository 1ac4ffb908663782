"""Filesystem operations behind the ``filesystem.Filesystem`` Connect service.

Error tree (domain, mapped to Connect codes in ``_service``)::

    FsError
    ├── FsNotFound        path (or watcher) does not exist      → not_found
    ├── FsAlreadyExists   MakeDir on an existing directory      → already_exists
    ├── FsInvalid         wrong kind of path (not a dir, ...)   → invalid_argument
    └── FsFailed          any other OS error                    → internal
"""

from bac_envd.filesystem._entry import Entry, FileKind, entry_info, go_file_mode
from bac_envd.filesystem._errors import FsAlreadyExists, FsError, FsFailed, FsInvalid, FsNotFound

__all__ = [
    "Entry",
    "FileKind",
    "FsAlreadyExists",
    "FsError",
    "FsFailed",
    "FsInvalid",
    "FsNotFound",
    "entry_info",
    "go_file_mode",
]
