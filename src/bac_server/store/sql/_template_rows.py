"""Converting between template records and table rows (times as epoch seconds)."""

from __future__ import annotations

from typing import Any

from bac_server.store.builds import BuildLogRecord, BuildRecord
from bac_server.store.catalog import TagRecord, TemplateRecord
from bac_server.store.sql._rows import dt, opt_dt, ts
from bac_server.store.uploads import UploadRecord


def template_values(t: TemplateRecord) -> dict[str, Any]:
    return {
        "template_id": t.template_id, "team_id": t.team_id, "name": t.name,
        "public": t.public, "aliases": list(t.aliases), "cpu_count": t.cpu_count,
        "memory_mb": t.memory_mb, "disk_mb": t.disk_mb, "created_at": ts(t.created_at),
        "updated_at": ts(t.updated_at), "build_count": t.build_count,
        "spawn_count": t.spawn_count,
        "last_spawned_at": None if t.last_spawned_at is None else ts(t.last_spawned_at),
    }


def template_record(r: Any) -> TemplateRecord:
    return TemplateRecord(
        template_id=r.template_id, team_id=r.team_id, name=r.name, public=bool(r.public),
        aliases=tuple(r.aliases or ()), cpu_count=r.cpu_count, memory_mb=r.memory_mb,
        disk_mb=r.disk_mb, created_at=dt(r.created_at), updated_at=dt(r.updated_at),
        build_count=r.build_count, spawn_count=r.spawn_count,
        last_spawned_at=opt_dt(r.last_spawned_at))


def build_values(b: BuildRecord) -> dict[str, Any]:
    return {
        "build_id": b.build_id, "template_id": b.template_id, "team_id": b.team_id,
        "status": b.status, "created_at": ts(b.created_at), "updated_at": ts(b.updated_at),
        "started_at": None if b.started_at is None else ts(b.started_at),
        "finished_at": None if b.finished_at is None else ts(b.finished_at),
        "cpu_count": b.cpu_count, "memory_mb": b.memory_mb, "disk_mb": b.disk_mb,
        "tags": list(b.tags), "recipe": b.recipe, "digest": b.digest, "config": b.config,
        "reason": b.reason, "reason_step": b.reason_step,
    }


def build_record(r: Any) -> BuildRecord:
    return BuildRecord(
        build_id=r.build_id, template_id=r.template_id, team_id=r.team_id, status=r.status,
        created_at=dt(r.created_at), updated_at=dt(r.updated_at),
        started_at=opt_dt(r.started_at), finished_at=opt_dt(r.finished_at),
        cpu_count=r.cpu_count, memory_mb=r.memory_mb, disk_mb=r.disk_mb,
        tags=tuple(r.tags or ()), recipe=r.recipe, digest=r.digest, config=r.config,
        reason=r.reason, reason_step=r.reason_step)


def log_values(e: BuildLogRecord) -> dict[str, Any]:
    return {"build_id": e.build_id, "seq": e.seq, "at": ts(e.at), "level": e.level,
            "step": e.step, "message": e.message}


def log_record(r: Any) -> BuildLogRecord:
    return BuildLogRecord(build_id=r.build_id, seq=r.seq, at=dt(r.at), level=r.level,
                          message=r.message, step=r.step)


def tag_record(r: Any) -> TagRecord:
    return TagRecord(template_id=r.template_id, tag=r.tag, build_id=r.build_id,
                     created_at=dt(r.created_at))


def upload_values(u: UploadRecord) -> dict[str, Any]:
    return {"team_id": u.team_id, "files_hash": u.files_hash, "path": u.path,
            "size_bytes": u.size_bytes, "created_at": ts(u.created_at)}


def upload_record(r: Any) -> UploadRecord:
    return UploadRecord(team_id=r.team_id, files_hash=r.files_hash, path=r.path,
                        size_bytes=r.size_bytes, created_at=dt(r.created_at))
