"""How ``bac template build`` shows a build: a live step list on a terminal, lines elsewhere.

Both views are fed the build's log lines (``on_log``), in terms of the steps as written
(one per Dockerfile instruction or builder call: ``Template.user_steps``). The live view
lists every step (from the recipe, so steps not reached yet show too) with its state
(waiting, running, cached, done, failed) and time, the total time, and the last lines of
the running step. The plain view (not a terminal, or ``--plain``) prints each line as
``[step] message`` (every line of a multi-line message carries the step), except the
build's error, which the command prints once, as its last line. Both write to stderr;
stdout is kept for the result.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from types import TracebackType

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from bac import BuildLogEntry, Template, TemplateBuildError

_CACHED = re.compile(r"\bcached\b", re.IGNORECASE)
_TAIL_LINES = 6


@dataclass
class _Step:
    name: str  # "base", "1"..., "finalize"
    label: str
    state: str = "waiting"  # waiting | running | cached | done | failed
    started: float | None = None
    ended: float | None = None
    lines: list[str] = field(default_factory=list)

    def elapsed(self, now: float) -> str:
        if self.started is None:
            return ""
        return f"{(self.ended or now) - self.started:.1f}s"


class BuildView:
    """Step states from log lines, rendered live or as plain lines."""

    def __init__(self, template: Template, name: str, console: Console, live: bool) -> None:
        self.name = name
        self.console = console
        self.live = live
        self.started = time.monotonic()
        written = template.user_steps.steps
        self.steps = [_Step("base", f"FROM {template.base.ref}")]
        self.steps += [_Step(step.number, f"{step.number}/{len(written)} {step.label}")
                       for step in written]
        self.steps.append(_Step("finalize", "finalize"))
        self._by_name = {step.name: step for step in self.steps}
        self._errors: list[BuildLogEntry] = []  # plain view: printed at the end, if at all
        self._live = Live(console=console, refresh_per_second=8, transient=False,
                          get_renderable=self.render) if live else None

    def __enter__(self) -> BuildView:
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        now = time.monotonic()
        for step in self.steps:
            if step.state == "running":
                step.state = "failed" if exc is not None else "done"
                step.ended = now
        if self._live is not None:
            self._live.stop()
        # The command ends on the build's error: an error line saying the same goes.
        reason = exc.reason if isinstance(exc, TemplateBuildError) else None
        for entry in self._errors:
            if entry.message != reason:
                self._print(entry)

    def _print(self, entry: BuildLogEntry) -> None:
        where = f"[{entry.step}] " if entry.step else ""
        style = "red" if entry.level == "error" else "yellow" if entry.level == "warn" else ""
        for line in entry.message.splitlines() or [""]:
            self.console.print(Text(f"{where}{line}", style=style), highlight=False)

    def on_log(self, entry: BuildLogEntry) -> None:
        """Feed one log line (called by the SDK as lines arrive)."""
        if self._live is None:
            if entry.level == "error":
                self._errors.append(entry)
            else:
                self._print(entry)
        step = self._by_name.get(entry.step or "")
        if step is None:
            return
        now = time.monotonic()
        index = self.steps.index(step)
        for earlier in self.steps[:index]:
            if earlier.state == "running":
                earlier.state, earlier.ended = "done", now
        if step.state == "waiting":
            step.state, step.started = "running", now
        if _CACHED.search(entry.message):
            step.state, step.ended = "cached", now
        elif step.state == "cached":  # a part of it that was not (a COPY of several sources)
            step.state, step.ended = "running", None
        if entry.level == "error":
            step.state, step.ended = "failed", now
        step.lines = (step.lines + entry.message.splitlines())[-_TAIL_LINES:]

    @property
    def cached(self) -> int:
        return sum(step.state == "cached" for step in self.steps)

    def render(self) -> RenderableType:
        now = time.monotonic()
        table = Table.grid(padding=(0, 1))
        table.add_column(width=2)
        table.add_column(overflow="ellipsis", no_wrap=True, ratio=1)
        table.add_column(justify="right")
        running: _Step | None = None
        for step in self.steps:
            mark: RenderableType = {"waiting": Text(" "), "cached": Text("=", "cyan"),
                                    "done": Text("✓", "green"), "failed": Text("✗", "red"),
                                    }.get(step.state, Spinner("dots"))
            right = "cached" if step.state == "cached" else step.elapsed(now)
            style = "dim" if step.state in ("waiting", "cached") else ""
            table.add_row(mark, Text(step.label, style=style), right)
            if step.state == "running":
                running = step
        title = Text.assemble(("Building ", "bold"), (self.name, "bold cyan"),
                              f"  {now - self.started:.1f}s")
        parts: list[RenderableType] = [title, table]
        if running is not None and running.lines:
            parts.append(Text("\n".join(f"  │ {line}" for line in running.lines), "dim"))
        return Group(*parts)
