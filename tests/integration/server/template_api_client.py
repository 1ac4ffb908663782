"""Driving the template API over plain HTTP, every response checked against the spec."""

from __future__ import annotations

import hashlib
import io
import tarfile
import time
import uuid
from typing import Any

import httpx
from openapi_check import check

BUILD_DEADLINE = 180.0
TPL = "/templates/{templateID}"
BUILD = TPL + "/builds/{buildID}"


def unique(label: str) -> str:
    return f"api-{label}-{uuid.uuid4().hex[:8]}"


def request_build(api: httpx.Client, name: str, **extra: Any) -> dict[str, Any]:
    response = api.post("/v3/templates", json={"name": name, **extra})
    check("POST", "/v3/templates", response)
    assert response.status_code == 202, response.text
    body: dict[str, Any] = response.json()
    return body


def start(api: httpx.Client, template_id: str, build_id: str,
          body: dict[str, Any]) -> httpx.Response:
    response = api.post(f"/v2/templates/{template_id}/builds/{build_id}", json=body)
    check("POST", "/v2" + BUILD, response)
    return response


def status(api: httpx.Client, template_id: str, build_id: str,
           **params: Any) -> dict[str, Any]:
    response = api.get(f"/templates/{template_id}/builds/{build_id}/status", params=params)
    check("GET", BUILD + "/status", response)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def wait(api: httpx.Client, template_id: str, build_id: str,
         until: tuple[str, ...] = ("ready", "error")) -> dict[str, Any]:
    # A polling client has nothing to wait on but the status itself: poll with a deadline.
    end = time.monotonic() + BUILD_DEADLINE
    while time.monotonic() < end:
        found = status(api, template_id, build_id, limit=0)
        if found["status"] in until:
            return found
        time.sleep(0.1)
    raise AssertionError(f"build {build_id} did not reach {until} in {BUILD_DEADLINE}s")


def build(api: httpx.Client, name: str, steps: list[dict[str, Any]],
          **body: Any) -> tuple[str, str, dict[str, Any]]:
    """Request, start and wait for a build from ``base``; (template id, build id, status)."""
    requested = request_build(api, name)
    template_id, build_id = requested["templateID"], requested["buildID"]
    started = start(api, template_id, build_id,
                    {"fromTemplate": "base", "steps": steps, **body})
    assert started.status_code == 202, started.text
    return template_id, build_id, wait(api, template_id, build_id)


def context_tar(files: dict[str, bytes]) -> tuple[bytes, str]:
    """A gzipped tar of ``files`` and a hash naming it (the SDK hashes the files itself)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    digest = hashlib.sha256(repr(sorted(files.items())).encode()).hexdigest()
    return buffer.getvalue(), digest


def upload(api: httpx.Client, template_id: str, files: dict[str, bytes]) -> str:
    """Upload a context the way the SDK does (link, then an unauthenticated PUT)."""
    data, files_hash = context_tar(files)
    link = api.get(f"/templates/{template_id}/files/{files_hash}")
    check("GET", TPL + "/files/{hash}", link)
    assert link.status_code == 201 and link.json()["present"] is False, link.text
    put = httpx.put(link.json()["url"], content=data, timeout=60)
    check("PUT", TPL + "/files/{hash}", put)
    assert put.status_code == 201, put.text
    return files_hash
