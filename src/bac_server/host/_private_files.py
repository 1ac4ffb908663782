"""Files only the server may read, written whole: a slot's records and OCI config, a
checkpoint's metadata, whatever names a sandbox's secrets or its way in.

They live in directories the sandboxes' runtime must traverse (0710, group the sandbox
root gid), so their own mode is what keeps an escaped sandbox root out: 0600, whatever
the process umask. Written to a temporary name and renamed over the old file, so a reader
(a restarting server) never sees one half written.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_private(path: Path, data: str | bytes) -> None:
    """Replace ``path`` with ``data``, 0600 and owned by the server's user."""
    raw = data.encode() if isinstance(data, str) else data
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def remove_partial_writes(directory: Path) -> None:
    """Remove the temporary files ``write_private`` left in ``directory`` when the server
    died between writing one and renaming it (``.<name>.<hex>.tmp``); links and
    directories are left alone."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.name.startswith(".") and entry.name.endswith(".tmp") \
                and entry.is_file(follow_symlinks=False):
            # SECURITY: only a regular file the server wrote, in a directory of its own.
            Path(entry.path).unlink(missing_ok=True)


def sync_directory(path: Path) -> None:
    """Make the names in ``path`` durable (a rename or link into it survives a crash)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
