"""Whether a template's service is ready: its ready command, run in the sandbox by envd.

A sandbox's create returns once envd's supervisor reported the start command ready, or
after its bound (``bac_envd._supervisor``'s ``READY_BOUND_S``) when it never was: a
booted sandbox stays usable without its service. A start snapshot must not be taken in
that second case, and the host cannot tell the two apart from outside, so it runs the
template's ready command itself, as the template's user in its working directory, until
it exits 0 or the bound passes. The loop runs in the sandbox as one command (one
``process.Process/Start`` call through the generated Connect client), and envd kills it at
the request's deadline (``Connect-Timeout-Ms``) if a check hangs.

Errors: ``ServiceNotReady`` (``backends.base``), the message saying what was seen.
"""

from __future__ import annotations

import base64

from connectrpc.errors import ConnectError
from protobuf import Oneof

from bac_protocol.envd.process_connect import ProcessClient
from bac_protocol.envd.process_pb import ProcessConfig, ProcessEvent, StartRequest
from bac_server.backends.base import SandboxEndpoint, ServiceNotReady

_SLACK_S = 5.0  # envd's deadline over the loop's own bound
_MAX_MESSAGE = 1 << 20
_OUTPUT_TAIL = 400

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


async def wait_until_ready(endpoint: SandboxEndpoint, *, token: str | None, user: str,
                           cwd: str, ready_cmd: str, bound_s: float) -> None:
    """Return once ``ready_cmd`` exits 0 in the sandbox; raise ``ServiceNotReady``
    otherwise."""
    seconds = max(1, round(bound_s))
    request = StartRequest(
        process=ProcessConfig(cmd="/bin/sh", args=["-c", _LOOP, "sh", str(seconds), ready_cmd],
                              cwd=cwd),
        stdin=False)
    headers = {"Authorization": "Basic " + base64.b64encode(f"{user}:".encode()).decode()}
    if token:
        headers["X-Access-Token"] = token
    output, end = b"", None
    try:
        async with ProcessClient(f"http://{endpoint.address}:{endpoint.envd_port}",
                                 send_compression=None, accept_compression=(),
                                 read_max_bytes=_MAX_MESSAGE) as client:
            async for response in client.start(
                    request, headers=headers, timeout_ms=int((seconds + _SLACK_S) * 1000)):
                match response.event.event if response.event is not None else None:
                    case Oneof(field="data", value=ProcessEvent.DataEvent(
                            output=Oneof(value=bytes() as chunk))):
                        output = (output + chunk)[-_OUTPUT_TAIL:]
                    case Oneof(field="end", value=ProcessEvent.EndEvent() as ended):
                        end = ended
                    case _:
                        pass
    except ConnectError as exc:
        raise ServiceNotReady(f"the ready check failed to run: {exc}") from exc
    except OSError as exc:
        raise ServiceNotReady(f"the ready check lost envd: {exc}") from exc
    if end is None:
        raise ServiceNotReady("the ready check ended without an exit status")
    if not end.exited or end.exit_code != 0:
        tail = output.decode(errors="replace").strip()
        status = end.status or f"exit code {end.exit_code}"
        raise ServiceNotReady(f"ready command {ready_cmd!r} did not succeed within "
                              f"{seconds} s ({status}){': ' + tail if tail else ''}")
