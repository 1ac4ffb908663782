"""Jupyter messages → the NDJSON lines of `POST /execute` (E2B code-interpreter format).

Line types: stdout, stderr, result, error, number_of_executions, end_of_execution,
keepalive. A result carries one key per MIME type the kernel produced; MIME types with no
key of their own go under `extra`, and keys without a value are left out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

Event = dict[str, Any]

DATA_MIME = "e2b/data"
CHART_MIME = "e2b/chart"

_MIME_KEYS: dict[str, str] = {
    "text/plain": "text",
    "text/html": "html",
    "text/markdown": "markdown",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "application/pdf": "pdf",
    "text/latex": "latex",
    "application/json": "json",
    "application/javascript": "javascript",
    DATA_MIME: "data",
    CHART_MIME: "chart",
}

# "Error: boom" / "TypeError: x is not a function" as the first line of a JS stack.
_JS_ERROR_LINE = re.compile(r"^(?:Uncaught )?([A-Za-z_$][\w$]*(?:Error|Exception)?): (.*)$", re.M)

KEEPALIVE = b'{"type":"keepalive"}\n'
END = {"type": "end_of_execution"}


def _encode_stdlib(event: Event) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"


try:  # ~10x faster on megabyte results (a DataFrame's data); optional
    import orjson

    def encode(event: Event) -> bytes:
        try:
            return orjson.dumps(event, option=orjson.OPT_APPEND_NEWLINE)
        except TypeError:  # a value orjson refuses (e.g. an int beyond 64 bits)
            return _encode_stdlib(event)

except ImportError:  # pragma: no cover - depends on what the sandbox image installed
    encode = _encode_stdlib


def _timestamp(msg: Mapping[str, Any]) -> str:
    date = msg["header"].get("date")
    return date.isoformat() if isinstance(date, datetime) else str(date or "")


def stream(msg: Mapping[str, Any]) -> Event:
    content = msg["content"]
    kind = "stderr" if content.get("name") == "stderr" else "stdout"
    return {"type": kind, "text": content.get("text", ""), "timestamp": _timestamp(msg)}


def _strip_quotes(text: str) -> str:
    # A Python str repr is quoted; E2B clients expect the bare string.
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def result(data: Mapping[str, Any], *, is_main: bool) -> Event:
    event: Event = {"type": "result"}
    extra: dict[str, Any] = {}
    for mime, value in data.items():
        if value is None:
            continue
        key = _MIME_KEYS.get(mime)
        if key is None:
            extra[mime] = value
            continue
        if key == "text" and isinstance(value, str):
            value = _strip_quotes(value)
        elif key in ("json", "data", "chart") and isinstance(value, str):
            # Some kernels send JSON MIME bundles serialized; clients want objects.
            try:
                value = json.loads(value)
            except ValueError:
                pass
        event[key] = value
    if extra:
        event["extra"] = extra
    event["is_main_result"] = is_main
    return event


def error(name: str, value: str, traceback: Sequence[str] | str) -> Event:
    text = traceback if isinstance(traceback, str) else "\n".join(traceback)
    return {"type": "error", "name": name, "value": value, "traceback": text}


def error_from_reply(content: Mapping[str, Any], stderr: str) -> Event:
    """An error for a failed execute_reply that came without an iopub error message.

    Bac's kernels all send one; a kernel that reports a failure only as stderr text plus a
    failed reply (tslab started without Bac's launcher does) gets its name and message
    read from the first "Name: message" line of that text.
    """
    name = str(content.get("ename") or "")
    value = str(content.get("evalue") or "")
    traceback = content.get("traceback") or stderr
    if not name:
        found = _JS_ERROR_LINE.search(stderr)
        if found:
            name, value = found.group(1), value or found.group(2)
        else:
            name = "Error"
            value = value or stderr.strip().splitlines()[-1] if stderr.strip() else value
    return error(name, value, traceback)


def execution_count(count: int) -> Event:
    return {"type": "number_of_executions", "execution_count": count}
