"""The store key's file: 32 random bytes (base64, one line), made at the first start.

``<data_dir>/keys/store.key`` unless ``BAC_STORE_KEY_FILE`` names another path; the file
is 0600 and its directory writable by root alone (``keys/`` is made 0700). The key never
enters the database, so a copy of the database without this file opens no secret; by the
same token, a database restored without its key file has lost its sealed values
(sandboxes' env vars and tokens), so back the two up separately.

Fails closed: a key file that is a symlink, not root's, or not a key stops the server
with the path in the message rather than making a new key over it. One that others could
read is made private again, with a warning that the key may be known.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import secrets
import stat
from pathlib import Path

from bac_server.host import sync_directory
from bac_server.store.base import StoreError
from bac_server.store.sealing import KEY_BYTES, Sealer

_log = logging.getLogger(__name__)


class KeyFileError(StoreError):
    """The store key file cannot be used as it is (the message names it)."""


def load_sealer(path: Path) -> Sealer:
    """The sealer of the key in ``path``; a new random key is written there first when
    there is none (concurrent first starts agree on one)."""
    _check_dir(path.parent)
    try:
        return Sealer(_read(path))
    except FileNotFoundError:
        pass
    _create(path)
    return Sealer(_read(path))


def _check_dir(directory: Path) -> None:
    if not directory.exists():
        directory.mkdir(mode=0o700, parents=True)
    st = os.lstat(directory)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise KeyFileError(f"store key directory {directory} is not a directory")
    # SECURITY: whoever can write the directory can swap the key file for one they know.
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise KeyFileError(f"store key directory {directory} is writable by others "
                           f"(owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o})")


def _read(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise KeyFileError(f"store key file {path} cannot be opened: {exc}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise KeyFileError(f"store key file {path} is not a file of this server's user")
        if st.st_mode & 0o077:
            # SECURITY: tighten first, then say so: the key may already be known.
            os.fchmod(fd, 0o600)
            _log.warning("store key file %s was readable by others (mode %o); made 0600. "
                         "Anyone who read it can open the sealed values of any copy of "
                         "the database", path, stat.S_IMODE(st.st_mode))
        raw = os.read(fd, 4096)
    finally:
        os.close(fd)
    try:
        key = base64.b64decode(raw.strip(), validate=True)
    except binascii.Error as exc:
        raise KeyFileError(f"store key file {path} does not hold a key") from exc
    if len(key) != KEY_BYTES:
        raise KeyFileError(f"store key file {path} does not hold a {KEY_BYTES}-byte key")
    return key


def _create(path: Path) -> None:
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    try:
        os.write(fd, base64.b64encode(Sealer.new_key()) + b"\n")
        os.fsync(fd)
        os.close(fd)
        fd = -1
        try:
            # A link, not a rename: a key another server made meanwhile is never replaced.
            os.link(temp, path)
        except FileExistsError:
            pass
        sync_directory(path.parent)
    finally:
        if fd >= 0:
            os.close(fd)
        temp.unlink(missing_ok=True)
    _log.info("made a new store key in %s", path)
