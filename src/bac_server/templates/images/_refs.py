"""Parse a FROM image reference into where the image comes from.

Accepted forms::

    debian:<suite>[-slim]                  built from Debian's archive with mmdebstrap
                                           (``debian:12`` is ``debian:bookworm``)
    oci:<dir>[:<tag>]                      an OCI image layout on disk
    oci-archive:<file>[:<tag>]             a tar of an OCI image layout
    docker-archive:<file>[:<name:tag>]     a ``docker save`` tar
    [host[:port]/]repo[:tag|@sha256:<hex>] an image in a registry (Docker Hub without host)

``debian:<suite>`` is Debian's archive, not Docker Hub's ``debian`` image; name that one
``docker.io/library/debian:<tag>``. Names without a registry go to ``BAC_REGISTRY_MIRROR``
(``host[:port]``) when it is set, to Docker Hub otherwise.

Local paths are read by the server, so they are confined (fail closed) to
``<data_dir>/imports`` (where a relative path points) and the directories listed in
``BAC_IMAGE_IMPORT_DIRS`` (colon-separated): a template build must not read arbitrary host
files.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ._model import ImageError, ImageErrorKind

HUB_HOSTS = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPOSITORY = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_HOST = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*"
                   r"[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")
_TAG = re.compile(r"[\w][\w.-]{0,127}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_SUITE = re.compile(r"[a-z][a-z0-9]*")
# Release numbers, as Docker Hub's debian tags use them, to the suites they name.
_RELEASES = {"11": "bullseye", "12": "bookworm", "13": "trixie", "14": "forky"}
# Suites without -updates and -security companions, which every build adds.
_UNSUPPORTED_SUITES = frozenset({"sid", "unstable", "experimental", "rc-buggy"})
_SYNTAX = ImageErrorKind.SYNTAX
LOCAL_TRANSPORTS = ("oci", "oci-archive", "docker-archive")
SYNTAX_HELP = ("expected debian:<suite>[-slim], oci:<dir>[:tag], oci-archive:<file>[:tag], "
               "docker-archive:<file>, or [host[:port]/]repo[:tag|@sha256:<hex>]")


@dataclass(frozen=True)
class DebianSuite:
    suite: str
    slim: bool

    def __str__(self) -> str:
        return f"debian:{self.suite}{'-slim' if self.slim else ''}"


@dataclass(frozen=True)
class LocalImage:
    transport: str  # one of LOCAL_TRANSPORTS
    path: str  # as written in the reference
    selector: str | None  # a tag (oci, oci-archive) or name:tag (docker-archive)

    def skopeo_name(self, resolved: Path) -> str:
        suffix = "" if self.selector is None else f":{self.selector}"
        return f"{self.transport}:{resolved}{suffix}"

    def __str__(self) -> str:
        return f"{self.transport}:{self.path}{'' if self.selector is None else ':' + self.selector}"


@dataclass(frozen=True)
class RegistryImage:
    host: str  # host[:port] as skopeo wants it; docker.io for Docker Hub
    repository: str
    tag: str | None
    digest: str | None

    @property
    def plain_http_allowed(self) -> bool:
        """Only a registry on this machine may be spoken to without TLS."""
        if self.host.startswith("["):
            name = self.host[1:self.host.index("]")]
        else:
            name = self.host.partition(":")[0]
        if name == "localhost":
            return True
        try:
            return ipaddress.ip_address(name).is_loopback
        except ValueError:
            return False

    def skopeo_name(self, pinned: str | None = None) -> str:
        base = f"docker://{self.host}/{self.repository}"
        if pinned is not None:
            return f"{base}@{pinned}"
        return f"{base}@{self.digest}" if self.digest else f"{base}:{self.tag or 'latest'}"

    def __str__(self) -> str:
        if self.digest:
            return f"{self.host}/{self.repository}@{self.digest}"
        return f"{self.host}/{self.repository}:{self.tag or 'latest'}"


ImageRef = DebianSuite | LocalImage | RegistryImage


def parse_image_ref(ref: str, mirror: str | None = None) -> ImageRef:
    """Parse ``ref``; ``mirror`` (``host[:port]``) replaces Docker Hub. Raises ImageError."""
    text = ref.strip()
    if not text or any(c.isspace() for c in text):
        raise ImageError(f"unknown image reference {ref!r}: {SYNTAX_HELP}", _SYNTAX)
    transport, sep, rest = text.partition(":")
    if sep and transport == "debian" and "/" not in rest:
        return _debian(ref, rest)
    if sep and transport in LOCAL_TRANSPORTS:
        path, _, selector = rest.partition(":")
        if not path or (selector and not re.fullmatch(r"[\w./:-]+", selector)):
            raise ImageError(f"unknown image reference {ref!r}: {SYNTAX_HELP}", _SYNTAX)
        return LocalImage(transport, path, selector or None)
    return _registry(ref, text, mirror)


def _debian(ref: str, rest: str) -> DebianSuite:
    suite, slim = (rest[:-5], True) if rest.endswith("-slim") else (rest, False)
    suite = _RELEASES.get(suite, suite)
    if not _SUITE.fullmatch(suite):
        raise ImageError(f"unknown image reference {ref!r}: a Debian suite is a name such as "
                         "bookworm, trixie or stable", _SYNTAX)
    if suite in _UNSUPPORTED_SUITES:
        raise ImageError(f"{ref}: Debian {suite} is not supported (it has no -security "
                         "suite); use testing or a release name", ImageErrorKind.NOT_FOUND)
    return DebianSuite(suite, slim)


def _registry(ref: str, text: str, mirror: str | None) -> RegistryImage:
    name, _, digest = text.partition("@")
    tag = None
    slash, colon = name.rfind("/"), name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
    host = None
    first, _, remainder = name.partition("/")
    if remainder and ("." in first or ":" in first or first == "localhost" or "[" in first):
        host, name = first, remainder
    bad = ((host is not None and not _HOST.fullmatch(host)) or not _REPOSITORY.fullmatch(name)
           or (tag is not None and not _TAG.fullmatch(tag))
           or (digest != "" and not _DIGEST.fullmatch(digest)))
    if bad:
        raise ImageError(f"unknown image reference {ref!r}: {SYNTAX_HELP}", _SYNTAX)
    if host is None or host in HUB_HOSTS:
        if "/" not in name:
            name = f"library/{name}"
        host = "docker.io"
        if mirror:
            if not _HOST.fullmatch(mirror):
                raise ImageError(f"BAC_REGISTRY_MIRROR={mirror!r} is not host[:port]", _SYNTAX)
            host = mirror
    return RegistryImage(host, name, tag, digest or None)


def image_import_dir(data_dir: Path) -> Path:
    """Where local images (OCI layouts and archives) may be put for import."""
    return data_dir / "imports"


def resolve_local_path(image: LocalImage, data_dir: Path) -> Path:
    """The real path of a local image, if it lies in an allowed directory."""
    roots = [image_import_dir(data_dir)]
    roots += [Path(p) for p in os.environ.get("BAC_IMAGE_IMPORT_DIRS", "").split(":") if p]
    written = Path(image.path)
    path = written if written.is_absolute() else roots[0] / written
    real = Path(os.path.realpath(path))
    # SECURITY: the server reads this path with root's rights; a build may name only what
    # the operator put in an import directory, never an arbitrary host file.
    if not any(real.is_relative_to(os.path.realpath(root)) for root in roots if root.is_absolute()):
        allowed = ", ".join(str(r) for r in roots)
        raise ImageError(f"{image}: {image.path} is outside the directories images may be "
                         f"imported from ({allowed}; more with BAC_IMAGE_IMPORT_DIRS)",
                         ImageErrorKind.FORBIDDEN)
    if not real.exists():
        raise ImageError(f"{image}: {real} does not exist", ImageErrorKind.NOT_FOUND)
    if ":" in str(real):
        raise ImageError(f"{image}: a path with ':' cannot be imported", _SYNTAX)
    return real
