"""Filesystem domain errors; the tree is drawn in the package docstring."""


class FsError(Exception):
    """Base class of filesystem operation failures."""


class FsNotFound(FsError):
    pass


class FsAlreadyExists(FsError):
    pass


class FsInvalid(FsError):
    pass


class FsFailed(FsError):
    pass
