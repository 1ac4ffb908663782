"""``SandboxTools``: the sandbox tools of :mod:`bac.agents._catalog` carried out with the
public SDK, each call's outcome a :class:`~bac.agents.ToolResult`.

Every call attaches to the sandbox it names through ``bac.AsyncSandbox`` with the
toolkit's connection options (its API key), does one thing, and releases its
connections; nothing is kept between calls, so one toolkit serves any number of
conversations. A call never raises for a failure a model can act on: a bad argument, an
unknown sandbox, a refused request come back as ``ToolResult.failure`` with one clear
sentence; only an unforeseen error is logged with its stack, and still answered in one
line.
"""

from __future__ import annotations

import codecs
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Unpack
from urllib.parse import urlsplit

from bac import (
    AsyncSandbox,
    CommandExitError,
    CommandResult,
    ConnectionConfig,
    ConnectionOpts,
    Lifecycle,
    NotFoundError,
    SandboxError,
    SandboxInfo,
    SandboxQuery,
)
from bac.agents import _catalog as catalog
from bac.agents._args import ArgumentError, Arguments
from bac.agents._model import ImagePart, Part, Progress, TextPart, ToolResult, ToolSpec

log = logging.getLogger("bac.agents")

# What one result hands a model at most of a command's or a cell's output, per stream:
# the end is kept (an error is at the end), the cut said.
MAX_OUTPUT_CHARS = 20_000
MAX_LISTED = 100
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

Handler = Callable[[Arguments, Progress | None], Awaitable[ToolResult]]


def _tail(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"[... {len(text) - limit} earlier characters cut ...]\n" + text[-limit:]


def _ok(text: str, **data: Any) -> ToolResult:
    return ToolResult((TextPart(text),), data)


def _describe(info: SandboxInfo) -> dict[str, Any]:
    return info.to_json()


class SandboxTools:
    """The tools, bound to one API key and server (``ConnectionOpts``; unset ones from the
    environment, as for ``AsyncSandbox``).

    ::

        tools = SandboxTools(api_key="...")
        result = await tools.call("create_sandbox", {"template": "code-interpreter"})
    """

    def __init__(self, **opts: Unpack[ConnectionOpts]) -> None:
        self._opts = opts
        self._handlers: dict[str, Handler] = {
            catalog.CREATE.name: self._create,
            catalog.LIST.name: self._list,
            catalog.RUN_COMMAND.name: self._run_command,
            catalog.RUN_CODE.name: self._run_code,
            catalog.READ_FILE.name: self._read_file,
            catalog.WRITE_FILE.name: self._write_file,
            catalog.LIST_FILES.name: self._list_files,
            catalog.PORT_URL.name: self._port_url,
            catalog.PAUSE.name: self._pause,
            catalog.RESUME.name: self._resume,
            catalog.CHECKPOINT.name: self._checkpoint,
            catalog.RESTORE.name: self._restore,
            catalog.FORK.name: self._fork,
            catalog.KILL.name: self._kill,
            catalog.TRACE.name: self._trace,
        }
        self._specs = {spec.name: spec for spec in catalog.SPECS}

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return catalog.SPECS

    def spec(self, name: str) -> ToolSpec | None:
        return self._specs.get(name)

    async def call(self, name: str, arguments: Mapping[str, Any] | None,
                   progress: Progress | None = None) -> ToolResult:
        """Carry out tool ``name``; ``progress`` is told each chunk of output as it comes."""
        spec = self._specs.get(name)
        if spec is None:
            return ToolResult.failure(
                f"there is no tool {name!r}; the tools are {', '.join(self._specs)}")
        try:
            args = Arguments(name, arguments, spec.parameters["properties"])
            return await self._handlers[name](args, progress)
        except ArgumentError as exc:
            return ToolResult.failure(str(exc))
        except SandboxError as exc:
            said = str(exc)  # the SDK's run_code errors already start with "run_code: "
            return ToolResult.failure(said if said.startswith(f"{name}: ") else
                                      f"{name}: {said}")
        except Exception as exc:
            log.exception("tool %s failed unexpectedly", name)
            return ToolResult.failure(
                f"{name} failed unexpectedly ({type(exc).__name__}: {exc}); the server's "
                "log has the details")

    # -- what resources show: the sandboxes the key can see --------------------------------

    async def sandboxes(self, metadata: dict[str, str] | None = None) -> list[SandboxInfo]:
        """This key's sandboxes, newest first (at most ``MAX_LISTED``)."""
        query = SandboxQuery(metadata=metadata) if metadata else None
        found: list[SandboxInfo] = []
        async for info in AsyncSandbox.list(query=query, **self._opts).all():
            found.append(info)
            if len(found) >= MAX_LISTED:
                break
        return found

    async def sandbox(self, sandbox_id: str) -> SandboxInfo:
        return await AsyncSandbox.get_info(sandbox_id, **self._opts)

    # -- the tools ----------------------------------------------------------------------------

    @asynccontextmanager
    async def _attached(self, sandbox_id: str) -> AsyncIterator[AsyncSandbox]:
        """The sandbox (a paused one is resumed), its connections released after."""
        box = await AsyncSandbox.attach(sandbox_id, **self._opts)
        try:
            yield box
        finally:
            await box.aclose()

    async def _create(self, args: Arguments, progress: Progress | None) -> ToolResult:
        template = args.optional_string("template", "base") or "base"
        on_timeout = args.choice("on_timeout", ("kill", "pause"), "kill")
        lifecycle: Lifecycle | None = {"on_timeout": "pause"} if on_timeout == "pause" \
            else None
        box = await AsyncSandbox.create(
            template, timeout=args.integer("timeout", 300), metadata=args.strings("metadata"),
            envs=args.strings("envs"), lifecycle=lifecycle, **self._opts)
        try:
            info = await box.get_info()
        except BaseException:
            await box.kill()  # not left running unseen: the model never got its id
            raise
        finally:
            await box.aclose()
        ends = "never ends" if info.end_at.year >= 9999 else \
            f"ends at {info.end_at.isoformat(timespec='seconds')} unless extended"
        if on_timeout == "pause":
            ends = ends.replace("ends", "pauses", 1)
        return _ok(f"Created sandbox {info.sandbox_id} from template {info.template_id}; it "
                   f"{ends}.", sandbox_id=info.sandbox_id, sandbox=_describe(info))

    async def _list(self, args: Arguments, progress: Progress | None) -> ToolResult:
        found = await self.sandboxes(args.strings("metadata") or None)
        if not found:
            return _ok("No sandboxes.", sandboxes=[])
        lines = [f"{i.sandbox_id}  {i.template_id}  {i.state.value}  "
                 f"metadata={json.dumps(i.metadata)}" for i in found]
        return _ok("\n".join(lines), sandboxes=[_describe(i) for i in found])

    async def _run_command(self, args: Arguments, progress: Progress | None) -> ToolResult:
        command = args.string("command")
        async with self._attached(args.string("sandbox_id")) as box:
            try:
                result = await box.commands.run(
                    command, envs=args.strings("envs") or None, cwd=args.optional_string("cwd"),
                    timeout=args.integer("timeout", 60), on_stdout=progress,
                    on_stderr=progress)
            except CommandExitError as exc:
                result = CommandResult(exc.stdout, exc.stderr, exc.exit_code, exc.error)
        parts = [f"exit code {result.exit_code}"]
        if result.stdout:
            parts.append("stdout:\n" + _tail(result.stdout))
        if result.stderr:
            parts.append("stderr:\n" + _tail(result.stderr))
        return _ok("\n".join(parts), exit_code=result.exit_code, stdout=_tail(result.stdout),
                   stderr=_tail(result.stderr))

    async def _run_code(self, args: Arguments, progress: Progress | None) -> ToolResult:
        code = args.text("code")
        language = args.optional_string("language", "python")

        async def line(message: Any) -> None:
            if progress is not None:
                await progress(str(message))

        async with self._attached(args.string("sandbox_id")) as box:
            execution = await box.run_code(
                code, language=None if language == "python" else language,
                timeout=args.integer("timeout", 300), on_stdout=line, on_stderr=line)
        texts: list[str] = []
        images: list[Part] = []
        stdout, stderr = "".join(execution.logs.stdout), "".join(execution.logs.stderr)
        if stdout:
            texts.append("stdout:\n" + _tail(stdout))
        if stderr:
            texts.append("stderr:\n" + _tail(stderr))
        results = []
        for result in execution.results:
            shown: dict[str, Any] = {"formats": result.formats()}
            if result.png is not None:
                images.append(ImagePart(result.png, "image/png"))
            elif result.jpeg is not None:
                images.append(ImagePart(result.jpeg, "image/jpeg"))
            if result.text is not None:
                shown["text"] = _tail(result.text)
                texts.append(("result: " if result.is_main_result else "display: ")
                             + _tail(result.text))
            if result.chart is not None:
                shown["chart"] = result.chart
            results.append(shown)
        error = None
        if execution.error is not None:
            err = execution.error
            error = {"name": err.name, "value": err.value,
                     "traceback": _tail(_ANSI.sub("", err.traceback))}
            texts.append(f"error: {err.name}: {err.value}\n{error['traceback']}")
        if images:
            texts.append(f"{len(images)} image(s) attached.")
        text = "\n".join(texts) or "The code ran and printed nothing."
        return ToolResult((TextPart(text), *images),
                          {"stdout": _tail(stdout), "stderr": _tail(stderr),
                           "results": results, "error": error})

    async def _read_file(self, args: Arguments, progress: Progress | None) -> ToolResult:
        path = args.string("path")
        limit = args.integer("max_bytes", 100_000, minimum=1)
        # Streamed and stopped at the limit: a huge file never sits whole in this process
        # (the server's, for /mcp).
        async with self._attached(args.string("sandbox_id")) as box:
            size = (await box.files.get_info(path)).size
            raw = b""
            async with await box.files.read(path, format="stream") as chunks:
                async for chunk in chunks:
                    raw += chunk
                    if len(raw) > limit:
                        break
        if b"\0" in raw[:8192]:
            return _ok(f"{path} is a binary file of {size} bytes; not shown.",
                       path=path, size=size, binary=True)
        cut = len(raw) > limit
        # A character the limit cuts in two is left out, not shown as a replacement.
        text = codecs.getincrementaldecoder("utf-8")("replace").decode(raw[:limit],
                                                                       final=not cut)
        note = f"\n[... cut at {limit} of {size} bytes ...]" if cut else ""
        return _ok(text + note, path=path, size=size, content=text, truncated=cut)

    async def _write_file(self, args: Arguments, progress: Progress | None) -> ToolResult:
        path, content = args.string("path"), args.text("content")
        async with self._attached(args.string("sandbox_id")) as box:
            info = await box.files.write(path, content)
        size = len(content.encode())
        return _ok(f"Wrote {size} bytes to {info.path}.", path=info.path, size=size)

    async def _list_files(self, args: Arguments, progress: Progress | None) -> ToolResult:
        path = args.optional_string("path", ".") or "."
        depth = args.integer("depth", 1, minimum=1, maximum=5)
        async with self._attached(args.string("sandbox_id")) as box:
            entries = await box.files.list(path, depth=depth)  # relative: to the home
        listed = [{"path": e.path, "name": e.name,
                   "type": e.type.value if e.type else "other", "size": e.size}
                  for e in entries]
        lines = [f"{x['type']:<7} {x['size']:>10}  {x['path']}" for x in listed]
        return _ok("\n".join(lines) or f"{path} is empty.", path=path, entries=listed)

    async def _port_url(self, args: Arguments, progress: Progress | None) -> ToolResult:
        port = args.integer("port", 0, minimum=1, maximum=65535)
        if port == 0:
            raise ArgumentError("get_port_url: port is required (1-65535)")
        async with self._attached(args.string("sandbox_id")) as box:
            scheme = urlsplit(ConnectionConfig.resolve(**self._opts).api_url).scheme
            url = f"{scheme}://{box.get_host(port)}"
            token = box.traffic_access_token
        text = f"Port {port} is reached at {url}"
        if token:
            text += f" (send the header e2b-traffic-access-token: {token})"
        return _ok(text + ".", url=url, port=port)

    async def _pause(self, args: Arguments, progress: Progress | None) -> ToolResult:
        sandbox_id = args.string("sandbox_id")
        paused = await AsyncSandbox.pause(sandbox_id, **self._opts)
        return _ok(f"Paused sandbox {sandbox_id}." if paused
                   else f"Sandbox {sandbox_id} was already paused.", sandbox_id=sandbox_id)

    async def _resume(self, args: Arguments, progress: Progress | None) -> ToolResult:
        sandbox_id = args.string("sandbox_id")
        timeout = args.integer("timeout", 0, minimum=1) or None
        await AsyncSandbox.resume(sandbox_id, timeout=timeout, **self._opts)
        return _ok(f"Sandbox {sandbox_id} is running.", sandbox_id=sandbox_id)

    async def _checkpoint(self, args: Arguments, progress: Progress | None) -> ToolResult:
        name = args.optional_string("name")
        async with self._attached(args.string("sandbox_id")) as box:
            saved = await box.checkpoint(name)
        named = f" named {saved.name!r}" if saved.name else ""
        return _ok(f"Saved checkpoint {saved.checkpoint_id}{named} of sandbox "
                   f"{saved.sandbox_id} ({saved.size_bytes} bytes).", **saved.to_json())

    async def _restore(self, args: Arguments, progress: Progress | None) -> ToolResult:
        sandbox_id, checkpoint = args.string("sandbox_id"), args.string("checkpoint")
        try:
            await AsyncSandbox.restore(sandbox_id, checkpoint, **self._opts)
        except NotFoundError as exc:
            have = await AsyncSandbox.checkpoints(sandbox_id, **self._opts)
            known = ", ".join(f"{c.name or '(unnamed)'} ({c.checkpoint_id})" for c in have)
            return ToolResult.failure(f"restore_sandbox: {exc}; its checkpoints: "
                                      f"{known or 'none'}")
        return _ok(f"Sandbox {sandbox_id} is back at checkpoint {checkpoint!r}.",
                   sandbox_id=sandbox_id, checkpoint=checkpoint)

    async def _fork(self, args: Arguments, progress: Progress | None) -> ToolResult:
        count = args.integer("count", 1, minimum=1, maximum=10)
        async with self._attached(args.string("sandbox_id")) as box:
            forks = await box.fork(count)
        made: list[str] = []
        failed: list[str] = []
        for fork in forks:
            if isinstance(fork, SandboxError):
                failed.append(str(fork))
            else:
                made.append(fork.sandbox_id)
                await fork.aclose()
        text = f"Forked into {', '.join(made)}." if made else "No fork was made."
        if failed:
            text += f" {len(failed)} failed: {'; '.join(failed)}"
        return ToolResult((TextPart(text),), {"sandbox_ids": made, "errors": failed},
                          is_error=not made)

    async def _kill(self, args: Arguments, progress: Progress | None) -> ToolResult:
        sandbox_id = args.string("sandbox_id")
        killed = await AsyncSandbox.kill(sandbox_id, **self._opts)
        return _ok(f"Killed sandbox {sandbox_id}." if killed
                   else f"Sandbox {sandbox_id} was already gone.", sandbox_id=sandbox_id,
                   killed=killed)

    async def _trace(self, args: Arguments, progress: Progress | None) -> ToolResult:
        sandbox_id = args.string("sandbox_id")
        kinds = [k.strip() for k in (args.optional_string("kinds") or "").split(",")
                 if k.strip()]
        page = await AsyncSandbox.trace(
            sandbox_id, kinds=kinds or None, after=args.integer("after", 0),
            limit=args.integer("limit", 50, minimum=1, maximum=200), **self._opts)
        events = [{"id": ev.id, "timestamp": ev.timestamp.isoformat(), "kind": ev.kind,
                   "message": ev.message, "fields": ev.fields} for ev in page.events]
        lines = [f"{ev['timestamp']}  {ev['kind']:<9} {ev['message']}" for ev in events]
        if page.next_cursor is not None:
            lines.append(f"(more: pass after={page.next_cursor})")
        return _ok("\n".join(lines) or "No events.", events=events,
                   next_cursor=page.next_cursor)
