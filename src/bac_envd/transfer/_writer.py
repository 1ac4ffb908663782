"""Write one uploaded file in E2B envd's syscall order.

mkdir missing parents → (existing file: chown) → open(O_WRONLY|O_CREAT|O_TRUNC, 0666) →
(new file: chown) → write… → replace ``user.e2b.*`` xattrs. The order matters to
watchers: a new file in a watched directory yields exactly CREATE, CHMOD, WRITE.
"""

from __future__ import annotations

import errno
import os
import stat

from bac_envd import _xattrs
from bac_envd._errors import os_error_text
from bac_envd._users import User
from bac_envd.filesystem._errors import FsError
from bac_envd.filesystem._ops import ensure_dirs
from bac_envd.transfer._faults import NO_SPACE, os_status, status_of


class UploadError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _os_error(action: str, exc: OSError) -> UploadError:
    status = os_status(exc)
    if status == NO_SPACE:
        return UploadError(status, f"not enough disk space available: {action}: {exc.strerror}")
    return UploadError(status, f"error {action}: {os_error_text(exc)}")


class UploadTarget:
    def __init__(self, path: str, user: User, metadata: dict[str, str]) -> None:
        self.path = path
        self._metadata = metadata
        try:
            ensure_dirs(os.path.dirname(path), user)
        except FsError as exc:
            raise UploadError(status_of(exc), f"error ensuring directories: {exc}") from exc
        try:
            st: os.stat_result | None = os.stat(path)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise _os_error("getting file info", exc) from exc
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise UploadError(400, f"path is a directory: {path}")
        if st is not None:
            self._chown(path, user)
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            raise _os_error("opening file", exc) from exc
        if st is None:
            self._chown(path, user)
        self.size = 0

    def _chown(self, path: str, user: User) -> None:
        try:
            # SECURITY: the uploaded file belongs to the acting sandbox user, never to
            # envd's own (root) identity.
            os.chown(path, user.uid, user.gid)
        except OSError as exc:
            self.close()
            raise _os_error("changing file ownership", exc) from exc

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            self.close()
            raise _os_error("writing file", exc) from exc
        self.size += len(data)

    def finish(self) -> None:
        try:
            _xattrs.replace(self._fd, self._metadata)
        except OSError as exc:
            if self._metadata or exc.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP):
                self.close()
                raise _os_error("setting file metadata", exc) from exc
        self.close()

    def close(self) -> None:
        fd, self._fd = getattr(self, "_fd", -1), -1
        if fd >= 0:
            os.close(fd)
