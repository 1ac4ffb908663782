"""Talking to the envd of a start snapshot's sandbox: is the service ready, and hand-out.

**Ready** (``wait_until_ready``): a sandbox's create returns once envd's supervisor
reported the start command ready, or after its bound (``bac_envd._supervisor``'s
``READY_BOUND_S``) when it never was: a booted sandbox stays usable without its service.
A start snapshot must not be taken in that second case, and the host cannot tell the two
apart from outside, so it runs the template's ready command itself — as the template's
user, in its working directory — until it exits 0 or ``bound_s`` passes. The loop runs
in the sandbox as one command (one request to envd), and envd kills it at the request's
deadline (``Connect-Timeout-Ms``) if a check hangs.

The call is envd's ``process.Process/Start`` in the Connect protocol (JSON, server
streaming over HTTP/1.1): the request is one envelope, the answer a sequence of envelopes
ending with an end-of-stream one (see ``shared/e2b-protocol.md``, "Connect").

**Hand-out** (``reinit``): a sandbox restored ahead (``template_snapshots_pool``) gets
its creator's token, env vars, user and working directory through envd's ``/init``, as a
restore does (``bac_server.backends.envd_http``); the request presents the token it was
restored with.

Errors::

    NotReady            the ready command never succeeded within the bound, or could not run
    InitRefused         envd did not accept ``/init``
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import httpx

from bac_server.backends.base import SandboxEndpoint, SandboxSpec
from bac_server.backends.envd_http import EnvdUnavailable, init_payload, post_init

_END_STREAM = 0x02
_HEADER = struct.Struct(">BI")
_MAX_MESSAGE = 1 << 20
_SLACK_S = 5.0  # envd's deadline over the loop's own, the HTTP client's over envd's
_OUTPUT_TAIL = 400
INIT_TIMEOUT_S = 10.0

# $1: seconds to keep trying, $2: the ready command. Same rhythm as the supervisor's.
_LOOP = r"""
deadline=$(( $(date +%s) + $1 ))
until /bin/sh -c "$2" </dev/null >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
        echo "not ready after $1 s" >&2
        exit 1
    fi
    sleep 0.25
done
"""


class NotReady(Exception):
    """The template's service did not become ready; the message says what was seen."""


class InitRefused(Exception):
    """envd answered ``/init`` with an error, or not at all."""


def _envelope(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return _HEADER.pack(0, len(body)) + body


class _Frames:
    """Cuts Connect envelopes out of a byte stream."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[tuple[int, dict[str, Any]]]:
        self._buffer.extend(chunk)
        out = []
        while len(self._buffer) >= _HEADER.size:
            flags, length = _HEADER.unpack_from(self._buffer)
            if length > _MAX_MESSAGE:
                raise NotReady(f"envd sent a {length}-byte message")
            if len(self._buffer) < _HEADER.size + length:
                break
            body = bytes(self._buffer[_HEADER.size:_HEADER.size + length])
            del self._buffer[:_HEADER.size + length]
            try:
                decoded = json.loads(body) if body else {}
            except ValueError as exc:
                raise NotReady(f"envd sent an undecodable message: {exc}") from exc
            out.append((flags, decoded if isinstance(decoded, dict) else {}))
        return out


async def wait_until_ready(endpoint: SandboxEndpoint, *, token: str | None, user: str,
                           cwd: str, ready_cmd: str, bound_s: float) -> None:
    """Return once ``ready_cmd`` exits 0 in the sandbox; raise ``NotReady`` otherwise."""
    seconds = max(1, round(bound_s))
    request = {"process": {"cmd": "/bin/sh", "args": ["-c", _LOOP, "sh", str(seconds),
                                                      ready_cmd], "cwd": cwd},
               "stdin": False}
    headers = {"Content-Type": "application/connect+json", "Connect-Protocol-Version": "1",
               "Connect-Timeout-Ms": str(int((seconds + _SLACK_S) * 1000)),
               "Authorization": "Basic " + base64.b64encode(f"{user}:".encode()).decode()}
    if token:
        headers["X-Access-Token"] = token
    url = f"http://{endpoint.address}:{endpoint.envd_port}/process.Process/Start"
    frames, output, end = _Frames(), "", None
    try:
        async with httpx.AsyncClient(timeout=seconds + 2 * _SLACK_S) as client, \
                client.stream("POST", url, content=_envelope(request),
                              headers=headers) as response:
            if response.status_code != 200:
                text = (await response.aread())[:_OUTPUT_TAIL].decode(errors="replace")
                raise NotReady(f"envd refused the ready check: {response.status_code} {text}")
            async for chunk in response.aiter_bytes():
                for flags, message in frames.feed(chunk):
                    if flags & _END_STREAM:
                        error = message.get("error")
                        if error:
                            raise NotReady(f"the ready check failed to run: {error}")
                        continue
                    event = message.get("event") or {}
                    output += _text(event.get("data") or {})
                    end = event.get("end", end)
    except httpx.HTTPError as exc:
        raise NotReady(f"the ready check lost envd: {exc}") from exc
    if end is None:
        raise NotReady("the ready check ended without an exit status")
    # proto3 JSON leaves zero values out: no exitCode means 0.
    if not end.get("exited", False) or end.get("exitCode", 0) != 0:
        tail = output.strip()[-_OUTPUT_TAIL:]
        status = end.get("status") or f"exit code {end.get('exitCode')}"
        raise NotReady(f"ready command {ready_cmd!r} did not succeed within {seconds} s "
                       f"({status}){': ' + tail if tail else ''}")


def _text(data: dict[str, Any]) -> str:
    raw = data.get("stdout") or data.get("stderr") or ""
    try:
        return base64.b64decode(raw).decode(errors="replace")
    except ValueError:
        return ""


async def reinit(endpoint: SandboxEndpoint, spec: SandboxSpec, *, current_token: str) -> None:
    """Give the sandbox ``spec``'s token and environment (the template's ENV under the
    create's env vars), user and working directory."""
    payload = init_payload(dict(spec.template.env) | spec.env_vars, spec.envd_access_token,
                           spec.template.default_user, spec.template.default_workdir)
    try:
        await post_init(endpoint.address, payload, INIT_TIMEOUT_S, current_token,
                        port=endpoint.envd_port)
    except EnvdUnavailable as exc:
        raise InitRefused(str(exc)) from exc
