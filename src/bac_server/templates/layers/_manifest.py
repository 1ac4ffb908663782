"""A built template on disk: which layers over which rootfs, and how its sandboxes start.

``<data_dir>/templates/manifests/<digest>.json``::

    {"digest": "<32 hex>",
     "rootfs": "templates/base/<digest>/rootfs",   # relative to data_dir when inside it
     "layers": ["layers/<key>/diff", ...],         # bottom first; empty layers left out
     "config": {"user", "workdir", "env", "start_cmd", "ready_cmd"},
     "allow_setuid": true,
     "created": <unix seconds>}

The digest covers everything but ``created``: two builds with the same result share one
manifest. The API layer stores only the digest; ``TemplateStore.built`` turns it into a
``TemplateImage`` and raises ``TemplateNotFound`` when the manifest or a layer it names
is gone.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from bac_server.backends.base import TemplateImage, TemplateNotFound

from .._steps import TemplateConfig
from ._store import digest as key_digest


@dataclass(frozen=True)
class BuiltTemplate:
    """The result of a build: what the API layer records is ``digest``."""

    digest: str
    config: TemplateConfig
    rootfs: Path
    layers: tuple[Path, ...]  # overlay diffs over ``rootfs``, bottom first
    allow_setuid: bool  # finalize found sudo in the image (TemplateImage.allow_setuid)


def config_json(config: TemplateConfig) -> dict[str, object]:
    return {"user": config.user, "workdir": config.workdir,
            "env": [list(pair) for pair in config.env],
            "start_cmd": config.start_cmd, "ready_cmd": config.ready_cmd}


def _config(raw: dict[str, object]) -> TemplateConfig:
    env = raw.get("env") or []
    assert isinstance(env, list)
    start, ready = raw.get("start_cmd"), raw.get("ready_cmd")
    return TemplateConfig(user=str(raw["user"]), workdir=str(raw["workdir"]),
                          env=tuple((str(k), str(v)) for k, v in env),
                          start_cmd=None if start is None else str(start),
                          ready_cmd=None if ready is None else str(ready))


def make_built(config: TemplateConfig, rootfs: Path, layers: tuple[Path, ...],
               allow_setuid: bool, data_dir: Path) -> BuiltTemplate:
    body = _body(config, rootfs, layers, allow_setuid, data_dir)
    return BuiltTemplate(digest=key_digest("manifest", body), config=config, rootfs=rootfs,
                         layers=layers, allow_setuid=allow_setuid)


def _shown(path: Path, data_dir: Path) -> str:
    return str(path.relative_to(data_dir) if path.is_relative_to(data_dir) else path)


def _body(config: TemplateConfig, rootfs: Path, layers: tuple[Path, ...], allow_setuid: bool,
          data_dir: Path) -> dict[str, object]:
    return {"rootfs": _shown(rootfs, data_dir), "layers": [_shown(p, data_dir) for p in layers],
            "config": config_json(config), "allow_setuid": allow_setuid}


def manifest_dir(data_dir: Path) -> Path:
    return data_dir / "templates" / "manifests"


def write_manifest(built: BuiltTemplate, data_dir: Path) -> Path:
    """Write ``built``'s manifest atomically (temp file, fsync, rename)."""
    folder = manifest_dir(data_dir)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    body = {"digest": built.digest,
            **_body(built.config, built.rootfs, built.layers, built.allow_setuid, data_dir),
            "created": time.time()}
    target = folder / f"{built.digest}.json"
    # Unique per writer: concurrent builds of one recipe write the same manifest.
    temp = folder / f".{built.digest}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        with open(temp, "w", encoding="utf-8") as handle:
            json.dump(body, handle, indent=2)
            handle.flush()
            os.fsync(handle.fileno())
        os.rename(temp, target)
    finally:
        temp.unlink(missing_ok=True)
    return target


def read_manifest(digest: str, data_dir: Path) -> BuiltTemplate:
    if not (len(digest) == 32 and all(c in "0123456789abcdef" for c in digest)):
        raise TemplateNotFound(f"no built template {digest!r} (not a template digest)")
    try:
        raw = json.loads((manifest_dir(data_dir) / f"{digest}.json").read_text())
    except FileNotFoundError as exc:
        raise TemplateNotFound(f"no built template {digest} (its manifest is gone)") from exc
    rootfs = data_dir / raw["rootfs"]  # an absolute path stays absolute
    return BuiltTemplate(digest=digest, config=_config(raw["config"]), rootfs=rootfs,
                         layers=tuple(data_dir / str(p) for p in raw["layers"]),
                         allow_setuid=bool(raw["allow_setuid"]))


def template_image(built: BuiltTemplate, template_id: str) -> TemplateImage:
    """What a backend needs to start sandboxes of ``built``; checks every part is there."""
    if not built.rootfs.is_dir():
        raise TemplateNotFound(f"template {template_id}: its base rootfs {built.rootfs} is gone")
    lowers = tuple(reversed(built.layers))
    for path in lowers:
        if not path.is_dir():
            raise TemplateNotFound(f"template {template_id}: its layer {path} is gone")
    return TemplateImage(template_id=template_id, rootfs=built.rootfs,
                         default_user=built.config.user, default_workdir=built.config.workdir,
                         allow_setuid=built.allow_setuid, lowers=lowers, env=built.config.env)
