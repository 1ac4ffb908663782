"""Talk to registries and image archives through skopeo.

Every call names its source completely (``docker://host/repo@sha256:...``, ``oci:/path``)
so no short-name resolution or search list of the host applies. TLS is required except
for a registry on loopback. Credentials go to skopeo in an auth file (0600, inside the
import's 0700 scratch directory, removed with it), never on a command line or in a log;
without credentials the pull is anonymous, so the server's own registry logins never
lend access to a build that did not bring its own.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ._model import ImageError, ImageErrorKind
from ._refs import RegistryImage
from ._tools import Progress, ToolResult, run_tool, tool_env, tool_error

INSPECT_TIMEOUT = "60s"


@dataclass(frozen=True)
class Source:
    """One image source as skopeo names it, with how to reach it."""

    name: str  # transport:reference
    what: str  # the reference as the user wrote it, for messages
    where: str = ""  # the registry host, for messages
    # (flag prefix-less) options: ["tls-verify=false", "authfile=/p" | "no-creds"]
    options: tuple[str, ...] = field(default=())

    def flags(self, prefix: str = "") -> list[str]:
        return [f"--{prefix}{option}" for option in self.options]

    def pinned(self, image: RegistryImage, digest: str) -> Source:
        return Source(image.skopeo_name(digest), self.what, self.where, self.options)


def _authfile(scratch: Path, host: str, username: str, password: str) -> Path:
    path = scratch / "auth.json"
    token = base64.b64encode(f"{username}:{password}".encode()).decode()
    # SECURITY: the secret exists only in this 0600 file of the import's 0700 scratch
    # directory (created exclusively, so no pre-placed file or link is reused).
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"auths": {host: {"auth": token}}}, out)
    return path


def registry_source(image: RegistryImage, what: str, scratch: Path,
                    username: str | None, password: str | None) -> Source:
    if (username is None) != (password is None):
        raise ImageError(f"{what}: registry credentials need both a username and a password",
                         ImageErrorKind.UNAUTHORIZED)
    # SECURITY: plain HTTP (and unverified TLS) only to a registry on this machine.
    options = ["tls-verify=false" if image.plain_http_allowed else "tls-verify=true"]
    if username is not None and password is not None:
        options.append(f"authfile={_authfile(scratch, image.host, username, password)}")
    else:
        options.append("no-creds")
    return Source(image.skopeo_name(), what, image.host, tuple(options))


def _global(scratch: Path) -> list[str]:
    return ["skopeo", "--tmpdir", str(scratch / "tmp")]


async def inspect(source: Source, scratch: Path, *, config: bool = False) -> bytes:
    """The raw manifest (or with ``config`` the raw config blob) of ``source``."""
    argv = [*_global(scratch), "--command-timeout", INSPECT_TIMEOUT, "inspect", "--raw",
            *(["--config"] if config else []), *source.flags(), source.name]
    result = await run_tool(argv, tool_env(scratch))
    if result.code != 0:
        raise tool_error(source.what, "reading the manifest", result, source.where)
    return result.stdout


async def copy(source: Source, layout: Path, tag: str, scratch: Path,
               progress: Progress) -> None:
    """Copy the image into an OCI layout (converting Docker formats to OCI)."""
    argv = [*_global(scratch), "copy", "--retry-times", "2", "--remove-signatures",
            *source.flags("src-"), source.name, f"oci:{layout}:{tag}"]
    result: ToolResult = await run_tool(argv, tool_env(scratch), progress)
    if result.code != 0:
        raise tool_error(source.what, "downloading the image", result, source.where)
