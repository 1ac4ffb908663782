"""Filesystem domain errors; the tree is drawn in the package docstring.

``from_os`` decides what an OS error says about the request: a path the kernel refuses
(too long, a loop, not a directory where one is needed), a place nobody may write (a
read-only mount such as ``/proc/sys``, a permission), a missing path or a full disk are
the client's to fix; anything else is envd's failure.
"""

from __future__ import annotations

import errno


class FsError(Exception):
    """Base class of filesystem operation failures."""


class FsNotFound(FsError):
    pass


class FsAlreadyExists(FsError):
    pass


class FsInvalid(FsError):
    pass


class FsDenied(FsError):
    pass


class FsNoSpace(FsError):
    pass


class FsFailed(FsError):
    pass


_BY_ERRNO: dict[int, type[FsError]] = {
    errno.ENOENT: FsNotFound,
    errno.ENOTDIR: FsNotFound,
    errno.EEXIST: FsAlreadyExists,
    errno.ENAMETOOLONG: FsInvalid,
    errno.ELOOP: FsInvalid,
    errno.EINVAL: FsInvalid,
    errno.EISDIR: FsInvalid,
    errno.ENOTEMPTY: FsInvalid,
    errno.EXDEV: FsInvalid,
    errno.EACCES: FsDenied,
    errno.EPERM: FsDenied,
    errno.EROFS: FsDenied,
    errno.ETXTBSY: FsDenied,
    errno.ENOSPC: FsNoSpace,
    errno.EDQUOT: FsNoSpace,
}


def from_os(message: str, exc: OSError) -> FsError:
    """The error ``exc`` means, saying ``message``."""
    return _BY_ERRNO.get(exc.errno or 0, FsFailed)(message)
