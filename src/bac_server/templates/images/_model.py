"""What importing a base image yields, and how it fails.

Error tree (template layer, image imports)::

    TemplateError
    └── ImageError     a FROM image could not be imported; the message says which image,
                       what went wrong and, where there is one, what to do about it;
                       ``kind`` (:class:`ImageErrorKind`) says the same for programs
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from .._errors import TemplateError


class ImageErrorKind(enum.Enum):
    """Why an import failed, for callers that map failures to statuses."""

    SYNTAX = "syntax"  # the reference is not one of the accepted forms
    NOT_FOUND = "not_found"  # no such image, tag, file or Debian suite
    UNAUTHORIZED = "unauthorized"  # the registry refused the (missing) credentials
    UNREACHABLE = "unreachable"  # the registry could not be reached, or not over TLS
    NOT_AN_IMAGE = "not_an_image"  # not an OCI layout or image archive, or malformed
    ARCHITECTURE = "architecture"  # no image for this server's OS and architecture
    FORBIDDEN = "forbidden"  # a local path outside the import directories
    DISK_FULL = "disk_full"
    FAILED = "failed"  # anything else; the message has the tool's words


class ImageError(TemplateError):
    """A base image could not be imported; nothing of it is left behind. ``registry``:
    the registry it came from (``host[:port]``), for one that could not be reached."""

    def __init__(self, message: str, kind: ImageErrorKind = ImageErrorKind.FAILED,
                 registry: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.registry = registry


@dataclass(frozen=True)
class ImageConfig:
    """The parts of an image's configuration a sandbox starts with."""

    env: tuple[tuple[str, str], ...] = ()
    user: str | None = None
    workdir: str | None = None
    cmd: tuple[str, ...] | None = None  # ENTRYPOINT + CMD joined as the image would run them

    def to_json(self) -> dict[str, object]:
        return {"env": [list(pair) for pair in self.env], "user": self.user,
                "workdir": self.workdir, "cmd": None if self.cmd is None else list(self.cmd)}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> ImageConfig:
        env = data.get("env") or []
        cmd = data.get("cmd")
        user, workdir = data.get("user"), data.get("workdir")
        if not isinstance(env, list) or (cmd is not None and not isinstance(cmd, list)):
            raise ValueError("malformed image config")
        return cls(env=tuple((str(k), str(v)) for k, v in env),
                   user=None if user is None else str(user),
                   workdir=None if workdir is None else str(workdir),
                   cmd=None if cmd is None else tuple(str(a) for a in cmd))


@dataclass(frozen=True)
class ImportedImage:
    """An imported image, ready to be the lowest layer of a template."""

    # Content identity: the manifest digest for OCI/registry images (``sha256:<hex>``),
    # the recipe digest for Debian suites.
    digest: str
    # A whole root filesystem, read-only from now on, shifted to the sandbox id range.
    rootfs: Path
    config: ImageConfig
