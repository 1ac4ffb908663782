"""File metadata as extended attributes ``user.e2b.<key>`` (E2B's ``X-Metadata-*``)."""

from __future__ import annotations

import os

PREFIX = "user.e2b."
MAX_KEY_BYTES = 246
MAX_TOTAL_BYTES = 4096


class BadMetadata(ValueError):
    """Metadata keys/values that E2B envd would refuse."""


def validate(metadata: dict[str, str]) -> dict[str, str]:
    """Lower-cased keys, printable ASCII only, within E2B's size limits."""
    clean: dict[str, str] = {}
    total = 0
    for raw_key, value in metadata.items():
        key = raw_key.lower()
        for text in (key, value):
            if not text.isascii() or not text.isprintable():
                raise BadMetadata(f"metadata {raw_key!r} must be printable ASCII")
        if not key or len(key) > MAX_KEY_BYTES:
            raise BadMetadata(f"metadata key {raw_key!r} must be 1..{MAX_KEY_BYTES} bytes")
        total += len(key) + len(value)
        clean[key] = value
    if total > MAX_TOTAL_BYTES:
        raise BadMetadata(f"metadata exceeds {MAX_TOTAL_BYTES} bytes in total")
    return clean


def read(path: str | int) -> dict[str, str]:
    """The metadata of a file; empty when it has none or the filesystem has no xattrs."""
    try:
        if isinstance(path, int):
            names = os.listxattr(path)
        else:
            names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        return {}
    found: dict[str, str] = {}
    for name in names:
        if not name.startswith(PREFIX):
            continue
        try:
            if isinstance(path, int):
                raw = os.getxattr(path, name)
            else:
                raw = os.getxattr(path, name, follow_symlinks=False)
        except OSError:
            continue
        found[name[len(PREFIX) :]] = raw.decode("utf-8", "replace")
    return found


def replace(fd: int, metadata: dict[str, str]) -> None:
    """Make ``metadata`` the file's whole metadata set (removing keys not in it)."""
    for key in read(fd).keys() - metadata.keys():
        os.removexattr(fd, PREFIX + key)
    for key, value in metadata.items():
        os.setxattr(fd, PREFIX + key, value.encode())
