"""Errors raised while checking or preparing the host.

Error tree (server start-up, host layer)::

    HostSetupError                 the host cannot run sandboxes as it is
    ├── MissingDependency          a binary or kernel feature is missing (with advice)
    ├── HostDeviceTaken            a device node sandboxes are given is not root's (_devices)
    ├── UnsafeDataDir              the data dir cannot be made private (_data_dir)
    └── HostChangeFailed           a preparation step (mount, nft, sysctl) failed
"""

from __future__ import annotations


class HostSetupError(Exception):
    """The host cannot run sandboxes until the message's advice is followed."""


class MissingDependency(HostSetupError):
    """A required binary or kernel feature is missing."""


class HostChangeFailed(HostSetupError):
    """A host preparation step failed."""


class UnsafeDataDir(HostSetupError):
    """The data directory, or an entry in it, is not as Bac made it and a repair would
    not make it safe (a symlink, another user's, writable by others)."""
