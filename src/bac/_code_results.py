"""What a code execution hands back, and how its NDJSON stream becomes one.

The kernel server streams one JSON object per line (see docs/code-interpreter.md):
``stdout``/``stderr``, ``result``, ``error``, ``number_of_executions``, ``keepalive``
and finally ``end_of_execution``. :class:`ExecutionParser` folds those lines into an
:class:`Execution` one at a time, so callers can fire callbacks as each line arrives.
Field names follow E2B's code-interpreter SDK so code moves between the two.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from bac._errors import ServerError

# Representations a result can carry, in the order ``formats()`` lists them.
RESULT_FORMATS = (
    "text", "html", "markdown", "svg", "png", "jpeg", "pdf", "latex", "json",
    "javascript", "data", "chart",
)


@dataclass(frozen=True)
class OutputMessage:
    """One chunk of stdout or stderr, as the kernel sent it."""

    line: str
    timestamp: str | None = None
    error: bool = False

    def __str__(self) -> str:
        return self.line


@dataclass(frozen=True)
class ExecutionError:
    """The exception a cell raised: its class name, message and formatted traceback."""

    name: str
    value: str
    traceback: str


@dataclass(frozen=True)
class Result:
    """One value a cell displayed or returned, in every representation it has.

    ``png``, ``jpeg`` and ``pdf`` are base64 strings; ``json``, ``data`` and ``chart``
    are decoded JSON; ``extra`` maps any other MIME type to its value.
    """

    text: str | None = None
    html: str | None = None
    markdown: str | None = None
    svg: str | None = None
    png: str | None = None
    jpeg: str | None = None
    pdf: str | None = None
    latex: str | None = None
    json: dict[str, Any] | None = None
    javascript: str | None = None
    data: dict[str, Any] | None = None
    chart: dict[str, Any] | None = None
    extra: dict[str, Any] | None = None
    is_main_result: bool = False

    def formats(self) -> list[str]:
        """The representations this result has, e.g. ``["text", "png", "chart"]``."""
        present = [name for name in RESULT_FORMATS if getattr(self, name) is not None]
        return present + sorted(self.extra or {})


@dataclass
class Logs:
    """Everything a cell printed, chunk by chunk."""

    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)


@dataclass
class Execution:
    """The outcome of one ``run_code``: results, printed output, and the error if any."""

    results: list[Result] = field(default_factory=list)
    logs: Logs = field(default_factory=Logs)
    error: ExecutionError | None = None
    execution_count: int | None = None

    @property
    def text(self) -> str | None:
        """Text of the cell's value (its last expression), if it had one."""
        for result in self.results:
            if result.is_main_result:
                return result.text
        return None


@dataclass(frozen=True)
class Context:
    """A kernel with its own state, language and working directory."""

    id: str
    language: str
    cwd: str

    @classmethod
    def from_json(cls, raw: Any) -> Context:
        if not isinstance(raw, dict):
            raise ServerError(f"the kernel server sent a context that is not an object: {raw!r}")
        try:
            return cls(id=str(raw["id"]), language=str(raw["language"]), cwd=str(raw["cwd"]))
        except KeyError as exc:
            raise ServerError(f"the kernel server's context lacks {exc}") from exc


Event = OutputMessage | Result | ExecutionError | None


def _result(line: dict[str, Any]) -> Result:
    known = {name: line[name] for name in RESULT_FORMATS if line.get(name) is not None}
    extra = line.get("extra")
    return Result(
        **known,
        extra=extra if isinstance(extra, dict) and extra else None,
        is_main_result=bool(line.get("is_main_result", False)),
    )


class ExecutionParser:
    """Folds NDJSON lines into :attr:`execution`; :meth:`feed` returns what to report."""

    def __init__(self) -> None:
        self.execution = Execution()
        self.ended = False

    def feed(self, raw: str | bytes) -> Event:
        """Apply one line; the new output, result or error it carried (None otherwise)."""
        if not raw.strip():
            return None
        try:
            line = json.loads(raw)
        except ValueError as exc:
            raise ServerError(f"the kernel server sent a line that is not JSON: {raw!r:.200}") \
                from exc
        if not isinstance(line, dict):
            raise ServerError(f"the kernel server sent a non-object line: {raw!r:.200}")
        kind = line.get("type")
        execution = self.execution
        if kind in ("stdout", "stderr"):
            text = str(line.get("text", ""))
            stamp = line.get("timestamp")
            (execution.logs.stdout if kind == "stdout" else execution.logs.stderr).append(text)
            return OutputMessage(text, str(stamp) if stamp else None, kind == "stderr")
        if kind == "result":
            result = _result(line)
            execution.results.append(result)
            return result
        if kind == "error":
            error = ExecutionError(
                str(line.get("name", "")), str(line.get("value", "")),
                str(line.get("traceback", "")),
            )
            execution.error = error
            return error
        if kind == "number_of_executions":
            count = line.get("execution_count")
            execution.execution_count = count if isinstance(count, int) else None
        elif kind == "end_of_execution":
            self.ended = True
        # keepalive and types this SDK does not know yet carry nothing to report.
        return None
