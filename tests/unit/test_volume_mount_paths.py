"""Where a volume may be mounted in a sandbox (``control.volumes.mount_path``): absolute,
normal, clear of the system's trees and of what Bac binds in."""

from __future__ import annotations

import pytest

from bac_server.control import InvalidRequest
from bac_server.control.volumes import mount_path


@pytest.mark.parametrize("path", ["/mnt/data", "/home/user/work", "/data", "/srv/a/b/c",
                                  "/tmp/x", "/mnt/data/", "/optional", "/running"])
def test_paths_a_volume_may_take(path: str) -> None:
    """Ordinary directories, a trailing slash dropped; names that merely start like a
    system tree's are fine."""
    assert mount_path(path) == path.rstrip("/")


@pytest.mark.parametrize("path", ["", "relative", "./x", "/", "/.", "//x", "/a/../b",
                                  "/a/./b", "/proc", "/proc/x", "/sys/fs", "/dev",
                                  "/etc/app", "/usr/local/x", "/run/bac", "/run", "/opt",
                                  "/opt/bac/x", "/lib64", "/x\x00y", "/" + "a" * 2000])
def test_paths_a_volume_may_not_take(path: str) -> None:
    """Relative, not normal, the root, in or over a system tree, NUL, too long: 400."""
    with pytest.raises(InvalidRequest, match="volumeMounts"):
        mount_path(path)
