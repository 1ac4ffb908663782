"""Run the image tools (skopeo, umoci), cancellation-safe.

A cancelled import must not leave a child process writing into a directory that is being
removed: children are killed and reaped before the cancellation propagates (blocking file
work goes through ``bac_server.cancel_safe.off_loop``, its threads waited for the same
way). Tool failures are translated once, here, into :class:`ImageError` messages that say
what went wrong in the user's terms.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bac_server.cancel_safe import end_child

from ._model import ImageError, ImageErrorKind

Progress = Callable[[str], None]
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")


@dataclass(frozen=True)
class ToolResult:
    code: int
    stdout: bytes
    stderr: str  # the last lines


def tool_env(scratch: Path) -> dict[str, str]:
    """A minimal environment: temporary files stay in ``scratch`` (removed with it), and
    ``HOME`` points there so no credentials of the server's user are picked up."""
    env = {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8", "HOME": str(scratch),
           "TMPDIR": str(scratch / "tmp"), "XDG_RUNTIME_DIR": str(scratch)}
    env.update({k: v for k, v in os.environ.items() if k in _PROXY_VARS})
    return env


async def run_tool(argv: list[str], env: dict[str, str],
                   progress: Progress | None = None, *, as_uid: int | None = None,
                   pass_fds: tuple[int, ...] = ()) -> ToolResult:
    """Run a tool to completion; with ``progress`` its output lines are reported as they
    come, otherwise its stdout is returned. ``as_uid``: the tool runs as that uid and gid
    with no supplementary groups (set by the child before exec: no ``preexec_fn``)."""
    identity: dict[str, Any] = {} if as_uid is None else {
        "user": as_uid, "group": as_uid, "extra_groups": [], "cwd": "/"}
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env, pass_fds=pass_fds, **identity)
    assert proc.stdout is not None and proc.stderr is not None
    tail: list[str] = []
    chunks: list[bytes] = []

    async def lines(stream: asyncio.StreamReader, keep: bool) -> None:
        async for raw in stream:
            line = raw.decode(errors="replace").rstrip()
            if keep:
                tail[:] = [*tail[-29:], line]
            if progress is not None and line.strip():
                progress(line.strip())
            elif progress is None and not keep:
                chunks.append(raw)

    try:
        await asyncio.gather(lines(proc.stdout, False), lines(proc.stderr, True))
        code = await proc.wait()
    except BaseException:
        await end_child(proc)
        raise
    return ToolResult(code, b"".join(chunks), "\n".join(tail))


def _message(stderr: str) -> str:
    """The human part of a Go tool's last log line (``msg="..."``), else the last line."""
    found = re.findall(r'msg="((?:[^"\\]|\\.)*)"', stderr)
    text = found[-1].replace('\\"', '"') if found else (stderr.strip().splitlines() or [""])[-1]
    text = text.removeprefix("Error parsing image name ")
    return re.sub(r'^"[^"]*": ', "", text).strip()


_K = ImageErrorKind
_KINDS: tuple[tuple[tuple[str, ...], ImageErrorKind, str], ...] = (
    (("no space left on device",), _K.DISK_FULL, "disk full while {step}: {detail}"),
    (("no image found in manifest list",), _K.ARCHITECTURE, "wrong architecture: {detail}"),
    (("server gave HTTP response to HTTPS client",), _K.UNREACHABLE,
     "registry {where} unreachable over TLS: it speaks plain HTTP, which only a registry "
     "on loopback may"),
    (("x509:", "certificate"), _K.UNREACHABLE,
     "registry {where} unreachable: TLS verification failed: {detail}"),
    (("unauthorized", "authentication required", "requested access to the resource is denied"),
     _K.UNAUTHORIZED,
     "unauthorized: registry {where} refused access (credentials missing or wrong, or "
     "the image is not visible to them)"),
    (("manifest unknown", "name unknown", "no descriptor found", "not found"), _K.NOT_FOUND,
     "image not found: {detail}"),
    (("connection refused", "no such host", "i/o timeout", "network is unreachable",
      "dial tcp", "deadline exceeded", "handshake timeout", "connection reset"),
     _K.UNREACHABLE, "registry {where} unreachable: {detail}"),
    (("index.json: no such file", "oci-layout", "invalid image layout"), _K.NOT_AN_IMAGE,
     "not an OCI image layout: {detail}"),
    (("invalid tar header", "unexpected EOF", "manifest.json"), _K.NOT_AN_IMAGE,
     "not an image archive: {detail}"),
    (("no such file or directory",), _K.NOT_FOUND, "not found: {detail}"),
)


def tool_error(what: str, step: str, result: ToolResult, where: str = "") -> ImageError:
    """Translate a failed tool run into the user's terms."""
    detail = _message(result.stderr) or f"exit status {result.code}"
    lowered = result.stderr.lower()
    for needles, kind, template in _KINDS:
        if any(n.lower() in lowered for n in needles):
            text = template.format(step=step, detail=detail, where=where or "?")
            return ImageError(f"{what}: {text}", kind)
    return ImageError(f"{what}: {step} failed (exit {result.code}): {detail}")
