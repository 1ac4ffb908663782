"""One template build over E2B's template API, from a :class:`~bac.Template` to a result.

1. Every COPY step's files are chosen and hashed locally, so a missing file fails before
   anything exists on the server.
2. ``POST /v3/templates`` registers the build (name, tags, resources).
3. For each distinct files hash, ``GET /templates/{id}/files/{hash}`` says whether the
   server has it; if not, a tar.gz of the files is ``PUT`` to the URL it answers (with the
   headers it gives, and nothing else: the URL may be another host's).
4. ``POST /v2/templates/{id}/builds/{build}`` starts the build with the steps.
5. Its log lines go to ``on_log`` as the server writes them (:mod:`bac._template._logs`),
   in terms of the steps as written (:mod:`bac._template._user_steps`: a COPY of several
   sources is one step, the Dockerfile's bookkeeping none); once it ends, a failure
   raises :class:`TemplateBuildError` with the failing step, the Dockerfile line it came
   from, and its last :data:`TAIL_LINES` output lines. Interrupted while waiting, the
   build is cancelled on the server (``DELETE .../builds/{build}``, a Bac extension).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from typing import IO, Any
from urllib.parse import urljoin

import httpx

from bac import _errors as e
from bac._api import ApiClient, api_error
from bac._config import http_client
from bac._template import _files as files
from bac._template._dockerignore import IgnoreRules, read_patterns
from bac._template._errors import TemplateBuildError
from bac._template._logs import build_path, cancel, entries, path_part, poll, status
from bac._template._models import BuildInfo, BuildLogEntry, BuildState
from bac._template._recipe import Template
from bac._template._steps import BaseRef
from bac._template._user_steps import UserSteps

LogCallback = Callable[[BuildLogEntry], object]
UPLOAD_TIMEOUT = 3600.0
TAIL_LINES = 40  # output lines of the failing step a TemplateBuildError keeps


def _note(on_log: LogCallback | None, message: str, step: str | None = None) -> None:
    if on_log is not None:
        on_log(BuildLogEntry(datetime.now(UTC), "info", message, step))


def prepare_copies(template: Template) -> dict[int, tuple[str, list[files.Selected]]]:
    """Files hash and selected files of each COPY step, by step index (blocking I/O)."""
    rules = IgnoreRules(read_patterns(template.context, template.ignore_patterns,
                                      template.dockerignore_file))
    out: dict[int, tuple[str, list[files.Selected]]] = {}
    for index, step in enumerate(template.steps):
        if step.type == "COPY":
            selected = files.select(template.context, step.args[0], rules, step.origin)
            out[index] = (files.files_hash(step.args[0], step.args[1], selected), selected)
    return out


async def _chunks(spool: IO[bytes]) -> AsyncIterator[bytes]:
    while chunk := spool.read(1 << 20):
        yield chunk


async def upload(url: str, headers: dict[str, str], selected: list[files.Selected]) -> int:
    """PUT a tar.gz of ``selected`` to ``url``; return its size in bytes."""
    spool = await asyncio.to_thread(files.pack, selected)
    try:
        size = spool.seek(0, 2)
        spool.seek(0)
        sent = {k: v for k, v in headers.items() if k.lower() != "content-length"}
        sent["Content-Length"] = str(size)
        async with http_client(timeout=httpx.Timeout(UPLOAD_TIMEOUT)) as client:
            try:
                response = await client.put(url, content=_chunks(spool), headers=sent)
            except httpx.TransportError as exc:
                raise e.ServerUnreachableError(f"cannot upload build files to {url}: {exc}"
                                               ) from exc
        if response.status_code >= 300:
            raise api_error(response)
        return size
    finally:
        spool.close()


def failure(steps: UserSteps, state: BuildState,
            seen: Sequence[BuildLogEntry]) -> TemplateBuildError:
    """The error of a failed build: its step as written, and that step's output (``seen``:
    the lines as shown; the server's reason lines when none were seen)."""
    step = steps.name_of(state.reason_step)
    written = steps.get(step)
    shown = list(seen) or [line for entry in state.reason_logs for line in steps.show(entry)]
    output = [entry for entry in shown if entry.step == step and entry.level != "error"
              and not steps.is_header(entry)]
    return TemplateBuildError(state.reason or "the build failed", template_id=state.template_id,
                              build_id=state.build_id, step=step,
                              origin=written.origin if written is not None else None,
                              instruction=written.label if written is not None else None,
                              logs=output[-TAIL_LINES:])


async def resolve_base(api: ApiClient, base: BaseRef) -> BaseRef:
    """A bare ``name[:tag]`` FROM: a template when the server knows the name, else an image."""
    if base.kind != "auto":
        return base
    found = await exists(api, base.ref.partition(":")[0])
    return BaseRef(base.ref, "template" if found else "image", base.username, base.password)


async def exists(api: ApiClient, name: str) -> bool:
    try:
        await api.request("GET", f"/templates/aliases/{path_part(name)}")
    except e.NotFoundError:
        return False
    except e.PermissionDeniedError:
        return True  # another team's: the name is taken
    return True


async def build(api: ApiClient, template: Template, name: str, *, tags: Sequence[str],
                cpu_count: int | None, memory_mb: int | None, skip_cache: bool,
                on_log: LogCallback | None) -> BuildInfo:
    started = time.monotonic()
    if not name or not name.strip():
        raise e.InvalidArgumentError("a template build needs a name")
    copies = await asyncio.to_thread(prepare_copies, template)
    steps = template.user_steps
    base = await resolve_base(api, template.base)
    request: dict[str, Any] = {"name": name}
    if tags:
        request["tags"] = list(tags)
    if cpu_count is not None:
        request["cpuCount"] = cpu_count
    if memory_mb is not None:
        request["memoryMB"] = memory_mb
    created = await api.json("POST", "/v3/templates", json=request, ok=(200, 201, 202))
    try:
        template_id, build_id = str(created["templateID"]), str(created["buildID"])
    except (KeyError, TypeError) as exc:
        raise e.ServerError(f"the server's build answer lacks {exc}") from exc
    _note(on_log, f"build {build_id} of template {template_id} ({name})")
    done: set[str] = set()
    for index, (digest, selected) in copies.items():
        step = steps.name_of(str(index + 1))
        source = template.steps[index].args[0]
        if digest in done:
            continue
        done.add(digest)
        link = await api.json("GET", f"/templates/{path_part(template_id)}/files/{digest}",
                              ok=(200, 201))
        if link.get("present") or not link.get("url"):
            _note(on_log, f"files of {source!r} already on the server", step)
            continue
        url = urljoin(api.config.api_url + "/", str(link["url"]))
        size = await upload(url, dict(link.get("headers") or {}), selected)
        _note(on_log, f"uploaded {source!r}: {len(selected)} entries, {size} bytes", step)
    body = template.to_wire({i: c[0] for i, c in copies.items()}, base, skip_cache)
    await api.request("POST", "/v2" + build_path(template_id, build_id), json=body,
                      ok=(200, 201, 202, 204))
    try:
        state, seen = await _watch(api, template_id, build_id, steps, on_log)
    except BaseException:
        # Interrupted (Ctrl-C, a cancelled task): the build must not run on unwatched.
        with contextlib.suppress(Exception):
            await asyncio.shield(asyncio.wait_for(cancel(api, template_id, build_id), 10))
        raise
    if state.status.value != "ready":
        raise failure(steps, state, seen)
    return BuildInfo(template_id, build_id, name, [str(t) for t in created.get("tags") or []],
                     time.monotonic() - started, len(steps.steps), steps.cached)


async def _watch(api: ApiClient, template_id: str, build_id: str, steps: UserSteps,
                 on_log: LogCallback | None) -> tuple[BuildState, list[BuildLogEntry]]:
    """Hand every log line, as ``steps`` show it, to ``on_log`` until the build ends; its
    final state and the last lines shown."""
    seen: list[BuildLogEntry] = []
    count = 0

    def take(entry: BuildLogEntry) -> None:
        nonlocal count
        count += 1  # the server's lines, where polling resumes
        for shown in steps.show(entry):
            seen.append(shown)
            if on_log is not None:
                on_log(shown)
        del seen[:-1000]

    async for entry in entries(api, template_id, build_id, follow=True):
        take(entry)
    state = await status(api, template_id, build_id, offset=1 << 30)
    if not state.status.finished:
        # The stream ended early (a proxy, a server restart): poll from where it stopped.
        async for state in poll(api, template_id, build_id, until_done=True, offset=count):
            for entry in state.logs:
                take(entry)
    return state, seen
