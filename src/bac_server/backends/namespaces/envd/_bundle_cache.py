"""Reusing envd bundles across data directories: hard links instead of a pip install.

A bundle is named by a hash of everything in it, so a bundle of that name in another data
directory (the one a shared templates dir belongs to: test servers, several servers on one
host) is exactly the bundle this one would build. `seed` hard-links its files into this
data dir's own bundles dir (copies where links cannot cross file systems), so every data
dir still owns, mounts and sweeps only its own bundles, and removing one copy never
touches another. `publish` links a bundle built here back the same way, so the next data
dir finds it.

Files of a finished bundle are never written again and sandboxes mount bundles read-only,
so the inodes two data dirs share change nothing either can observe.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import stat
from pathlib import Path

_log = logging.getLogger(__name__)


class _Untrusted(Exception):
    """A seed that someone other than this process's user could have written."""


def _trusted(st: os.stat_result) -> bool:
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _check_dir(directory: str, _names: list[str]) -> list[str]:
    # SECURITY: a seed is linked into bundles that sandboxes run; every directory of it
    # must be ours and writable by no one else, or it is not used at all (we build).
    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode) or not _trusted(st):
        raise _Untrusted(directory)
    return []


def _link(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
            raise
        shutil.copy2(src, dst)


def _link_trusted(src: str, dst: str) -> None:
    # SECURITY: as for directories: a file anyone else could write is never linked.
    st = os.lstat(src)
    if not stat.S_ISREG(st.st_mode) or not _trusted(st):
        raise _Untrusted(src)
    _link(src, dst)


def seed(source: Path, work: Path) -> bool:
    """Fill the empty directory `work` from the finished bundle `source`. False (and
    `work` left empty) when there is no such bundle, or it is not trusted."""
    try:
        if not (source / "lib").is_dir() or not _trusted(os.lstat(source.parent)):
            return False
        shutil.copytree(source, work, symlinks=True, ignore=_check_dir,
                        copy_function=_link_trusted, dirs_exist_ok=True)
        return True
    except (OSError, _Untrusted) as exc:
        if isinstance(exc, _Untrusted):
            _log.warning("not reusing envd bundle %s: %s is not only ours to write", source, exc)
        else:
            _log.info("could not link envd bundle %s (%s); building it", source, exc)
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(mode=0o755, exist_ok=True)
        return False


def publish(bundle: Path, cache: Path) -> None:
    """Link the finished `bundle` into `cache` under its own name, unless one is there
    already or `cache` is not ours alone. Best effort: a failure only costs a later build."""
    final = cache / bundle.name
    try:
        if (final / "lib").is_dir() or not _trusted(os.lstat(cache)):
            return
    except FileNotFoundError:
        return  # no shared bundles dir (its data dir was never prepared): nothing to share
    work = cache / f".publish-{bundle.name}-{os.getpid()}"
    try:
        shutil.copytree(bundle, work, symlinks=True, copy_function=_link)
        os.rename(work, final)
    except OSError as exc:  # a concurrent publisher won, or the disk said no
        _log.info("did not share envd bundle %s in %s: %s", bundle.name, cache, exc)
        shutil.rmtree(work, ignore_errors=True)
