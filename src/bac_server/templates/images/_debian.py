"""``FROM debian:<suite>[-slim]``: a minbase rootfs built from Debian's archive.

It is built the way the ``base`` template is (:func:`build_rootfs`: mmdebstrap, the same
sources and the same finishing touches: user ``user``, no resolver, empty machine-id),
with only what every sandbox needs on top of minbase: ``python3`` (envd runs on it) and
``ca-certificates``. Like Docker Hub's ``debian`` images, ``-slim`` leaves out man pages,
documentation and translations; the image runs as root in ``/`` with ``bash``.

The recipe digest names the build, so a suite alias such as ``stable`` stays what it was
when first built until the builder version changes.
"""

from __future__ import annotations

import dataclasses
import errno
from pathlib import Path

from .._errors import TemplateBuildError
from ..builtin import DPKG_EXCLUDES, Recipe, base_recipe, build_rootfs
from ._model import ImageConfig, ImageError, ImageErrorKind
from ._refs import DebianSuite
from ._tools import Progress

SUITE_PACKAGES = ("ca-certificates", "python3")
SUITE_CONFIG = ImageConfig(
    env=(("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),),
    cmd=("bash",),
)


def suite_recipe(suite: DebianSuite, id_base: int) -> Recipe:
    """``base``'s recipe on ``suite`` with only what every sandbox needs: no sudo rule,
    pip as Debian ships it, documentation left out only by ``-slim``."""
    return dataclasses.replace(
        base_recipe(id_base), name=f"debian-{suite.suite}{'-slim' if suite.slim else ''}",
        suite=suite.suite, packages=SUITE_PACKAGES, passwordless_sudo=False,
        pip_break_system_packages=False, dpkg_options=DPKG_EXCLUDES if suite.slim else ())


async def build_suite(suite: DebianSuite, recipe: Recipe, scratch: Path, id_size: int,
                      progress: Progress) -> Path:
    """Build into ``scratch``; returns the directory holding ``rootfs``."""
    try:
        return await build_rootfs(recipe, scratch / "debian", progress, id_size)
    except TemplateBuildError as exc:
        text = str(exc)
        if "does not have a Release file" in text:
            raise ImageError(f"{suite}: Debian's archive has no suite '{suite.suite}'",
                             ImageErrorKind.NOT_FOUND) from exc
        if "No space left on device" in text:
            raise ImageError(f"{suite}: disk full while building it",
                             ImageErrorKind.DISK_FULL) from exc
        raise ImageError(f"{suite}: building it from Debian's archive failed: {text}") from exc
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise ImageError(f"{suite}: disk full while building it",
                             ImageErrorKind.DISK_FULL) from exc
        raise
