"""The dashboard's client of a sandbox's envd: processes, a terminal, files.

It speaks envd's own protocol (Connect RPC with the JSON codec over HTTP/1.1, and
``/files``), the one the official SDK speaks through the gateway, to the address the
gateway relays to (the registry's ``Route``), with the envd token kept on the server: the
browser never holds it. Each call counts as the sandbox's traffic (its idle policy sees
a terminal in use as activity), as a gateway request would.

Error tree::

    EnvdError        envd answered an error, or could not be reached (message says which)
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from bac_server.backends.dialing import Dialer, dialed_transport
from bac_server.control import Registry, Route

_USER = "user"
_END_STREAM = 0x02
_MAX_FRAME = 4 << 20
_UNARY_TIMEOUT_S = 10.0


class EnvdError(Exception):
    pass


@dataclass(frozen=True)
class Process:
    pid: int
    cmd: str
    args: list[str]
    tag: str | None
    cwd: str | None


@dataclass(frozen=True)
class Entry:
    name: str
    path: str
    kind: str  # "file", "dir", "symlink"
    size: int
    permissions: str
    owner: str
    modified: str


def _auth(user: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:".encode()).decode()


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return struct.pack(">BI", 0, len(body)) + body


class Envd:
    """One sandbox's envd, for one dashboard request (or one terminal's life)."""

    def __init__(self, route: Route, registry: Registry, client: httpx.AsyncClient) -> None:
        self._route = route
        self._registry = registry
        self._client = client
        self._base = f"http://{route.address}:{route.envd_port}"

    def _headers(self, content_type: str) -> dict[str, str]:
        return {"X-Access-Token": self._route.envd_access_token, "Authorization": _auth(_USER),
                "Content-Type": content_type, "Connect-Protocol-Version": "1"}

    async def unary(self, method: str, message: dict[str, Any]) -> dict[str, Any]:
        self._registry.traffic_started(self._route.sandbox_id)
        try:
            answer = await self._client.post(
                f"{self._base}/{method}", content=json.dumps(message).encode(),
                headers=self._headers("application/json"), timeout=_UNARY_TIMEOUT_S)
        except httpx.HTTPError as exc:
            raise EnvdError(f"the sandbox's envd did not answer: {exc}") from exc
        finally:
            self._registry.traffic_ended(self._route.sandbox_id)
        try:
            body = answer.json()
        except ValueError:
            body = {}
        if answer.status_code != 200:
            message_ = body.get("message") if isinstance(body, dict) else None
            raise EnvdError(f"envd: {message_ or answer.status_code}")
        if not isinstance(body, dict):
            raise EnvdError("envd: an answer that is not an object")
        return body

    async def stream(self, method: str, message: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """A server stream's messages, until its end (an error in it: ``EnvdError``)."""
        self._registry.traffic_started(self._route.sandbox_id)
        try:
            async with self._client.stream(
                    "POST", f"{self._base}/{method}", content=_frame(message),
                    headers=self._headers("application/connect+json"),
                    timeout=httpx.Timeout(_UNARY_TIMEOUT_S, read=None)) as answer:
                if answer.status_code != 200:
                    raise EnvdError(f"envd: {answer.status_code} "
                                    f"{(await answer.aread())[:200].decode(errors='replace')}")
                buffer = b""
                async for chunk in answer.aiter_bytes():
                    buffer += chunk
                    while len(buffer) >= 5:
                        flags, size = struct.unpack(">BI", buffer[:5])
                        if size > _MAX_FRAME:
                            raise EnvdError("envd: a message larger than the bound")
                        if len(buffer) < 5 + size:
                            break
                        body = json.loads(buffer[5:5 + size] or b"{}")
                        buffer = buffer[5 + size:]
                        if flags & _END_STREAM:
                            error = body.get("error") if isinstance(body, dict) else None
                            if error:
                                raise EnvdError(f"envd: {error.get('message', error)}")
                            return
                        yield body
        except httpx.HTTPError as exc:
            raise EnvdError(f"the sandbox's envd did not answer: {exc}") from exc
        finally:
            self._registry.traffic_ended(self._route.sandbox_id)

    async def processes(self) -> list[Process]:
        body = await self.unary("process.Process/List", {})
        found = []
        for item in body.get("processes", []):
            config = item.get("config", {})
            found.append(Process(pid=int(item.get("pid", 0)), cmd=str(config.get("cmd", "")),
                                 args=[str(a) for a in config.get("args", [])],
                                 tag=item.get("tag"), cwd=config.get("cwd")))
        return sorted(found, key=lambda p: p.pid)

    async def run(self, script: str) -> tuple[int, str]:
        """Run ``script`` with ``bash -l -c`` as the user to its end: its exit code and
        the tail of its stderr."""
        exit_code, stderr = -1, b""
        start = {"process": {"cmd": "/bin/bash", "args": ["-l", "-c", script]}}
        async for message in self.stream("process.Process/Start", start):
            event = message.get("event", {})
            data = event.get("data", {})
            if "stderr" in data:
                stderr = (stderr + base64.b64decode(data["stderr"]))[-4096:]
            end = event.get("end")
            if isinstance(end, dict):
                exit_code = int(end.get("exitCode", 0))
        return exit_code, stderr.decode(errors="replace").strip()

    async def kill(self, pid: int) -> None:
        await self.unary("process.Process/SendSignal",
                         {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})

    async def send_input(self, pid: int, data: bytes) -> None:
        await self.unary("process.Process/SendInput",
                         {"process": {"pid": pid},
                          "input": {"pty": base64.b64encode(data).decode()}})

    async def resize(self, pid: int, rows: int, cols: int) -> None:
        await self.unary("process.Process/Update",
                         {"process": {"pid": pid}, "pty": {"size": {"rows": rows, "cols": cols}}})

    def terminal(self, rows: int, cols: int) -> AsyncIterator[dict[str, Any]]:
        """A login shell on a new PTY: its events (``start`` with the pid, ``data.pty``
        base64 output, ``end``)."""
        return self.stream("process.Process/Start", {
            "process": {"cmd": "/bin/bash", "args": ["-i", "-l"],
                        "envs": {"TERM": "xterm-256color", "LANG": "C.UTF-8"}},
            "pty": {"size": {"rows": rows, "cols": cols}}, "tag": "mission-control"})

    async def list_dir(self, path: str) -> list[Entry]:
        body = await self.unary("filesystem.Filesystem/ListDir", {"path": path, "depth": 1})
        kinds = {"FILE_TYPE_FILE": "file", "FILE_TYPE_DIRECTORY": "dir",
                 "FILE_TYPE_SYMLINK": "symlink"}
        found = [Entry(name=str(e.get("name", "")), path=str(e.get("path", "")),
                       kind=kinds.get(str(e.get("type")), "other"),
                       size=int(e.get("size", 0) or 0),
                       permissions=str(e.get("permissions", "")),
                       owner=str(e.get("owner", "")),
                       modified=str(e.get("modifiedTime", ""))[:19].replace("T", " "))
                 for e in body.get("entries", [])]
        return sorted(found, key=lambda e: (e.kind != "dir", e.name))

    def download(self, path: str) -> httpx.Request:
        """The request for a file's bytes (sent streamed by the caller)."""
        return self._client.build_request(
            "GET", f"{self._base}/files", params={"path": path, "username": _USER},
            # The bytes are relayed as they come: none compressed on the way.
            headers={"X-Access-Token": self._route.envd_access_token,
                     "Accept-Encoding": "identity"})

    async def upload(self, path: str, name: str, data: bytes) -> None:
        self._registry.traffic_started(self._route.sandbox_id)
        try:
            answer = await self._client.post(
                f"{self._base}/files", params={"path": path, "username": _USER},
                files={"file": (name, data)},
                headers={"X-Access-Token": self._route.envd_access_token}, timeout=60)
        except httpx.HTTPError as exc:
            raise EnvdError(f"the sandbox's envd did not answer: {exc}") from exc
        finally:
            self._registry.traffic_ended(self._route.sandbox_id)
        if answer.status_code != 200:
            raise EnvdError(f"envd: upload refused ({answer.status_code}): "
                            f"{answer.text[:200]}")


def envd_client(dialer: Dialer, sandbox_id: str,
                timeout: httpx.Timeout | None = None) -> httpx.AsyncClient:
    """An HTTP client for one sandbox's envd, its connections opened by ``dialer`` (through
    the sandbox's node when several machines run them)."""
    return httpx.AsyncClient(transport=dialed_transport(dialer, sandbox_id),
                             timeout=timeout if timeout is not None else httpx.Timeout(5.0))
