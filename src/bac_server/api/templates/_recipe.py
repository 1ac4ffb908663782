"""``TemplateBuildStartV2`` (what the official SDK sends to start a build) → ``BuildRecipe``.

Step ``args`` are as E2B's SDK builds them::

    RUN      [command] or [command, user]
    COPY     [src, dest, user or "", mode as octal digits or ""]   + filesHash
    ENV      [key, value, key, value, ...]
    WORKDIR  [path]
    USER     [name]

Steps are numbered from 1 (the names the SDK maps errors back to its call sites with);
every refusal is a 400 naming the step. (``fromImage`` ``e2bdev/base``, the SDK's default
and ``from_base_image()``, is the built-in ``base`` template: the engine maps it.)

Every key the official SDK sends is listed in the body models (``forceUpload``,
``resolveSymlinks`` and ``gzip`` of a step are client-side upload options, accepted and
ignored); any other key is a 400.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import StrictBool, StrictStr

from bac_server.api.body import Strict
from bac_server.api.errors import BadRequest
from bac_server.templates import (
    BuildRecipe,
    CopyStep,
    EnvStep,
    FromImage,
    FromTemplate,
    RunStep,
    Step,
    UserStep,
    WorkdirStep,
)

MAX_STEPS = 500
_HASH = re.compile(r"^[0-9a-f]{16,128}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_KINDS = "RUN, COPY, ENV, WORKDIR or USER"


class BuildStepBody(Strict):
    type: StrictStr
    args: list[StrictStr] | None = None
    filesHash: StrictStr | None = None
    force: StrictBool | None = None
    forceUpload: StrictBool | None = None
    resolveSymlinks: StrictBool | None = None
    gzip: StrictBool | None = None


class TemplateBuildStart(Strict):
    """``POST /v2/templates/{templateID}/builds/{buildID}`` (``TemplateBuildStartV2``)."""

    fromImage: StrictStr | None = None
    fromTemplate: StrictStr | None = None
    fromImageRegistry: dict[str, Any] | None = None
    force: StrictBool | None = None
    steps: list[BuildStepBody] | None = None
    startCmd: StrictStr | None = None
    readyCmd: StrictStr | None = None


def to_recipe(body: TemplateBuildStart) -> BuildRecipe:
    steps = body.steps or []
    if len(steps) > MAX_STEPS:
        raise BadRequest(f"a template has at most {MAX_STEPS} steps, got {len(steps)}")
    return BuildRecipe(
        source=_source(body),
        steps=tuple(_step(number, step) for number, step in enumerate(steps, start=1)),
        start_cmd=_command(body.startCmd, "startCmd"),
        ready_cmd=_command(body.readyCmd, "readyCmd"),
        force=body.force is True,
    )


def _source(body: TemplateBuildStart) -> FromTemplate | FromImage:
    if body.fromImage is not None and body.fromTemplate is not None:
        raise BadRequest("give fromImage or fromTemplate, not both")
    registry = body.fromImageRegistry
    if body.fromTemplate is not None:
        if registry is not None:
            raise BadRequest("fromImageRegistry applies to fromImage only")
        if not body.fromTemplate.strip():
            raise BadRequest("fromTemplate must name a template")
        return FromTemplate(body.fromTemplate)
    if body.fromImage is None or not body.fromImage.strip():
        raise BadRequest("missing fromImage or fromTemplate: where does the template start?")
    if registry is None:
        return FromImage(body.fromImage)
    kind = registry.get("type")
    if kind != "registry":
        raise BadRequest(f"fromImageRegistry type {str(kind)[:40]!r} is not supported by this "
                         "server (only 'registry', with username and password)")
    username, password = registry.get("username"), registry.get("password")
    if not isinstance(username, str) or not isinstance(password, str) or \
            not username or not password or set(registry) - {"type", "username", "password"}:
        raise BadRequest("fromImageRegistry needs exactly type, username and password")
    return FromImage(body.fromImage, username=username, password=password)


def _command(value: str | None, field: str) -> str | None:
    if value is not None and "\0" in value:
        raise BadRequest(f"{field} contains a NUL byte")
    return value or None


def _step(number: int, body: BuildStepBody) -> Step:
    kind = body.type.upper()
    where = f"step {number} ({kind})"
    args = body.args or []
    if any("\0" in a for a in args):
        raise BadRequest(f"{where}: an argument contains a NUL byte")
    force = body.force is True
    if kind != "COPY" and body.filesHash is not None:
        raise BadRequest(f"{where}: filesHash belongs to COPY steps only")
    if kind == "RUN":
        _count(where, args, 1, 2, "[command] or [command, user]")
        if not args[0].strip():
            raise BadRequest(f"{where}: the command is empty")
        return RunStep(command=args[0], user=(args[1] or None) if len(args) > 1 else None,
                       force=force)
    if kind == "COPY":
        return _copy(where, args, body.filesHash, force)
    if kind == "ENV":
        if not args or len(args) % 2:
            raise BadRequest(f"{where}: args must be key, value pairs, got {len(args)} items")
        pairs = tuple((args[i], args[i + 1]) for i in range(0, len(args), 2))
        for key, _value in pairs:
            if not _ENV_NAME.match(key):
                raise BadRequest(f"{where}: {key[:60]!r} is not a valid variable name")
        return EnvStep(values=pairs, force=force)
    if kind == "WORKDIR":
        _count(where, args, 1, 1, "[path]")
        if not args[0].strip():
            raise BadRequest(f"{where}: the path is empty")
        return WorkdirStep(path=args[0], force=force)
    if kind == "USER":
        _count(where, args, 1, 1, "[user]")
        if not args[0].strip() or any(c.isspace() for c in args[0]):
            raise BadRequest(f"{where}: {args[0][:60]!r} is not a user name")
        return UserStep(user=args[0], force=force)
    raise BadRequest(f"step {number}: unknown step type {body.type[:40]!r} "
                     f"(expected {_KINDS})")


def _copy(where: str, args: list[str], files_hash: str | None, force: bool) -> CopyStep:
    _count(where, args, 2, 4, "[src, dest, user, mode]")
    src, dest = args[0], args[1]
    if not src.strip() or not dest.strip():
        raise BadRequest(f"{where}: source and destination must not be empty")
    if files_hash is None:
        raise BadRequest(f"{where}: missing filesHash (the hash of the uploaded files of "
                         f"{src!r})")
    if not _HASH.match(files_hash):
        raise BadRequest(f"{where}: filesHash {files_hash[:80]!r} is not a lowercase hex digest")
    user = args[2] if len(args) > 2 and args[2] else None
    mode: int | None = None
    if len(args) > 3 and args[3]:
        try:
            mode = int(args[3], 8)
        except ValueError as exc:
            raise BadRequest(f"{where}: mode {args[3][:20]!r} is not octal") from exc
        if not 0 <= mode <= 0o7777:
            raise BadRequest(f"{where}: mode {args[3]!r} is out of range (0000-7777)")
    return CopyStep(src=src, dest=dest, files_hash=files_hash, user=user, mode=mode,
                    force=force)


def _count(where: str, args: list[str], low: int, high: int, shape: str) -> None:
    if not low <= len(args) <= high:
        raise BadRequest(f"{where}: args must be {shape}, got {len(args)} items")
