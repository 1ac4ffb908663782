"""Template storage collection against what is in flight on a real server: a running
build, uploaded build contexts (expiry, use by a build) and the per-team upload quota."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from pathlib import Path

import httpx
import pytest
from gc_fixtures import (
    ServerProcess,
    collect,
    collect_async,
    deleted,
    layers,
    name,
    opts,
    srv,
)

from bac import AsyncTemplates, BuildLogEntry, Template

pytestmark = [pytest.mark.root, pytest.mark.slow]
__all__ = ["srv"]


def _uploads(server: ServerProcess) -> set[str]:
    root = server.data_dir / "template-uploads"
    return {p.name for p in root.rglob("*") if p.is_file()} if root.is_dir() else set()


async def test_a_running_build_is_never_touched(srv: ServerProcess, tmp_path: Path) -> None:
    """While a build runs (its COPY and two RUN layers published, one of them empty and
    so mounted by no step, a later step running), a collection deletes nothing and keeps
    the COPY's upload even with a zero TTL; once the build is cancelled, a collection
    deletes those layers and the upload."""
    token = uuid.uuid4().hex
    (tmp_path / "ctx.txt").write_text(token)
    template = (Template("base", context=tmp_path).copy("ctx.txt", "/ctx.txt")
                .run(f"echo first-{token} > /first", user="root")
                # Changes nothing: an empty layer, which no later step mounts, so only the
                # build's hold on the collection keeps it before the manifest names it.
                .run(f": {token}", user="root")
                # The marker is printed, not written in the step: its label shows $((...)).
                .run("echo running-$((40+2)); exec sleep 300", user="root"))
    before, uploaded_before = layers(srv), _uploads(srv)
    running = asyncio.Event()

    def on_log(entry: BuildLogEntry) -> None:
        if entry.message.strip() == "running-42":
            running.set()

    async with AsyncTemplates(**opts(srv)) as templates:
        build = asyncio.create_task(templates.build(template, name("running"), on_log=on_log))
        marker = asyncio.create_task(running.wait())
        await asyncio.wait({build, marker}, timeout=180, return_when=asyncio.FIRST_COMPLETED)
        assert running.is_set(), build.exception() if build.done() else "step never started"
        published = layers(srv) - before
        uploaded = _uploads(srv) - uploaded_before
        assert len(published) == 3 and uploaded
        in_progress = list((srv.data_dir / "layers" / ".tmp").iterdir())
        assert in_progress

        during = await collect_async(srv, BAC_UPLOAD_TTL_S="0")
        assert "build" in (during["skipped"] or ""), during
        assert during["deleted"] == [] and during["uploads"] == []
        assert published <= layers(srv) and uploaded <= _uploads(srv)
        assert all(p.exists() for p in in_progress)
        build.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await build
    after = await collect_async(srv, BAC_UPLOAD_TTL_S="0")
    assert after["skipped"] is None, after
    assert published <= deleted(after, "layer") and not published & layers(srv)
    assert not uploaded & _uploads(srv)


def test_uploads_expire_unused_and_the_quota_answers_507(srv: ServerProcess) -> None:
    """An uploaded context is kept while used within the TTL and deleted, file and row,
    once unused past it (the API then asks for it again); an upload beyond the team's
    quota (1 MiB here), announced or streamed, is refused with 507 naming the quota and
    leaves no file."""
    with httpx.Client(base_url=srv.url, headers={"X-API-KEY": srv.keys[0]},
                      timeout=60) as api:
        made = api.post("/v3/templates", json={"name": name("uploads")})
        assert made.status_code == 202, made.text
        template_id = made.json()["templateID"]

        def link(files_hash: str) -> dict[str, object]:
            answer = api.get(f"/templates/{template_id}/files/{files_hash}")
            assert answer.status_code == 201, answer.text
            body: dict[str, object] = answer.json()
            return body

        files_hash = uuid.uuid4().hex * 2
        put = httpx.put(str(link(files_hash)["url"]), content=b"context" * 100, timeout=60)
        assert put.status_code == 201, put.text
        assert f"{files_hash}.tar" in _uploads(srv)
        fresh = collect(srv, BAC_UPLOAD_TTL_S="3600")
        assert files_hash not in {u["files_hash"] for u in fresh["uploads"]}
        assert link(files_hash) == {"present": True}
        expired = collect(srv, BAC_UPLOAD_TTL_S="0")
        assert files_hash in {u["files_hash"] for u in expired["uploads"]}
        assert f"{files_hash}.tar" not in _uploads(srv)
        assert link(files_hash)["present"] is False

        big = os.urandom(3 << 19)  # 1.5 MiB
        for body in (big, iter([big[:1 << 20], big[1 << 20:]])):
            big_hash = uuid.uuid4().hex * 2
            refused = httpx.put(str(link(big_hash)["url"]), content=body, timeout=60)
            assert refused.status_code == 507, refused.text
            assert "quota of 1 MiB" in refused.json()["message"]
            assert not any(big_hash in n for n in _uploads(srv))
