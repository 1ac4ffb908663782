"""Stat, MakeDir, Move, ListDir and Remove, with E2B envd's semantics.

Paths given here are already resolved (``bac_envd._paths``). ``ensure_dirs`` is shared
with uploads: missing parents are created 0755 and handed to the acting user.
"""

from __future__ import annotations

import errno
import os
import stat

from bac_envd._errors import os_error_text
from bac_envd._users import User
from bac_envd.filesystem._entry import Entry, NameCache, entry_from_stat, entry_info
from bac_envd.filesystem._errors import FsAlreadyExists, FsInvalid, FsNotFound, from_os


def ensure_dirs(path: str, user: User) -> None:
    """Create ``path`` and its missing parents, each owned by ``user``."""
    missing: list[str] = []
    probe = path
    while True:
        try:
            st = os.stat(probe)
        except FileNotFoundError:
            missing.append(probe)
            parent = os.path.dirname(probe)
            if parent == probe:
                break
            probe = parent
            continue
        except OSError as exc:
            raise from_os(f"failed to stat directory: {os_error_text(exc)}", exc) from exc
        if not stat.S_ISDIR(st.st_mode):
            raise FsInvalid(f"path is a file: {probe}")
        break
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o755)
            # SECURITY: envd (root in the sandbox) hands the new directory to the acting
            # sandbox user; both live inside the sandbox's user namespace.
            os.chown(directory, user.uid, user.gid)
        except FileExistsError:
            continue
        except OSError as exc:
            raise from_os(f"failed to create directory: {os_error_text(exc)}", exc) from exc


def make_dir(path: str, user: User) -> Entry:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise from_os(f"error getting file info: {os_error_text(exc)}", exc) from exc
    else:
        if stat.S_ISDIR(st.st_mode):
            raise FsAlreadyExists(f"directory already exists: {path}")
        raise FsInvalid(f"path already exists but it is not a directory: {path}")
    ensure_dirs(path, user)
    return entry_info(path)


def move(source: str, destination: str, user: User) -> Entry:
    try:
        os.lstat(source)
    except FileNotFoundError as exc:
        raise FsNotFound(f"source file not found: {source}") from exc
    except OSError as exc:
        raise from_os(f"error getting source file info: {os_error_text(exc)}", exc) from exc
    ensure_dirs(os.path.dirname(destination), user)
    try:
        os.rename(source, destination)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise from_os(f"error renaming: {os_error_text(exc)}", exc) from exc
        import shutil

        try:
            shutil.move(source, destination)
        except OSError as move_exc:
            raise from_os(f"error moving across filesystems: {move_exc}", move_exc) from move_exc
    return entry_info(destination)


def remove(path: str) -> None:
    """Remove a file or a whole tree; a missing path is not an error."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise from_os(f"error removing file or directory: {os_error_text(exc)}", exc) from exc
    try:
        if stat.S_ISDIR(st.st_mode):
            import shutil

            shutil.rmtree(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise from_os(f"error removing file or directory: {os_error_text(exc)}", exc) from exc


def list_dir(path: str, depth: int) -> list[Entry]:
    """Entries below ``path`` up to ``depth`` levels, pre-order, names sorted per directory.

    A symlink at ``path`` is resolved first; symlinks below it are reported, not followed.
    """
    depth = depth or 1
    try:
        root = os.path.realpath(path, strict=True)
    except FileNotFoundError as exc:
        raise FsNotFound(f"path not found: {path}") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FsInvalid(f"cyclic symlink or chain >255 links at {path!r}") from exc
        raise from_os(f"error resolving symlink: {os_error_text(exc)}", exc) from exc
    if not os.path.isdir(root):
        raise FsInvalid(f"path is not a directory: {path}")
    names = NameCache()
    entries: list[Entry] = []
    _walk(root, depth, names, entries)
    return entries


def _walk(directory: str, depth: int, names: NameCache, out: list[Entry]) -> None:
    try:
        with os.scandir(directory) as it:
            children = sorted(it, key=lambda e: os.fsencode(e.name))
    except OSError as exc:
        raise from_os(f"error reading directory {directory}: {os_error_text(exc)}", exc) from exc
    for child in children:
        try:
            st = child.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue  # removed while we listed
        except OSError as exc:
            text = os_error_text(exc)
            raise from_os(f"error reading directory {directory}: {text}", exc) from exc
        out.append(entry_from_stat(child.path, st, names))
        if depth > 1 and child.is_dir(follow_symlinks=False):
            _walk(child.path, depth - 1, names, out)
