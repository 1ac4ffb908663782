"""What the ``base`` template is made of. Its hash names the build: change it, get a rebuild.

The recipe mirrors what E2B's base template gives and what its SDK tests expect: Debian
with bash, coreutils, Python 3 with pip and venv, git, curl, sudo, and a user ``user``
(uid/gid 1000, home and working directory ``/home/user``, passwordless sudo).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass

# Bump when the builder changes what it produces from the same recipe.
BUILDER_VERSION = 1
BASE_ALIASES = frozenset({"base"})

BASE_PACKAGES = (
    "bash", "bzip2", "ca-certificates", "coreutils", "curl", "file", "findutils", "git",
    "gzip", "iproute2", "less", "nano", "ncurses-bin", "netbase", "procps", "python3",
    "python3-pip", "python3-venv", "sudo", "tar", "tzdata", "unzip", "wget", "xz-utils",
)

# Documentation is useless in a sandbox and is a third of a minbase image.
DPKG_EXCLUDES = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-include=/usr/share/locale/locale.alias",
)


@dataclass(frozen=True)
class Recipe:
    name: str
    suite: str
    variant: str
    packages: tuple[str, ...]
    user: str
    uid: int
    home: str
    passwordless_sudo: bool
    # pip installs into the system Python, as in E2B's images (PEP 668 marker ignored).
    pip_break_system_packages: bool
    # Host id the rootfs is shifted to (container uid 0 -> id_base).
    id_base: int
    dpkg_options: tuple[str, ...] = DPKG_EXCLUDES
    builder_version: int = BUILDER_VERSION

    def digest(self) -> str:
        """A stable short hash of everything that shapes the built rootfs."""
        blob = json.dumps(dataclasses.asdict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def base_recipe(id_base: int) -> Recipe:
    return Recipe(
        name="base",
        suite="bookworm",
        variant="minbase",
        packages=BASE_PACKAGES,
        user="user",
        uid=1000,
        home="/home/user",
        passwordless_sudo=True,
        pip_break_system_packages=True,
        id_base=id_base,
    )
