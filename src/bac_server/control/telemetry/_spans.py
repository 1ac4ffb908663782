"""A sandbox's trace as spans: what each event the log holds becomes, in plain values
(no OpenTelemetry types: :mod:`._otlp` turns them into the SDK's spans).

One trace per sandbox. Its trace id and its root span's id are derived from the sandbox
id (SHA-256), so every span written over the sandbox's life, by this process or a later
one (after a restart), joins one trace under one root. The root, ``sandbox``, runs from
the create to the end and is written when the sandbox ends (killed, timed out, died, its
create failed); the other events are its children as they are logged:

==========================  ===================================================  ==========
event kind                  span                                                  its time
==========================  ===================================================  ==========
process                     ``process``                                           as it ran
transfer                    ``files.upload`` / ``files.download``                 as it ran
started                     ``sandbox.start``                                     the create
paused, timeout with mode   ``sandbox.pause``                                     the pause
resumed                     ``sandbox.resume``                                    the resume
checkpointed, snapshot      ``sandbox.checkpoint``                                instant
network                     ``sandbox.network``                                   its interval
every other kind            ``sandbox.<kind>`` (``oom_kill``, ``egress_denied``,   instant
                            ``warning``, ``timeout_set``, ...)
==========================  ===================================================  ==========

Every span carries the sandbox's id, team, template (when known) and metadata
(``bac.metadata.<key>``), so a run (``bac.metadata.run_id``) is found by attribute.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from bac_server.store import EventRecord

from ..sandboxes import EventKind, Registry

AttributeValue = str | bool | int | float | tuple[str, ...]

ROOT = "sandbox"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_TEXT = 1024
# Sandboxes whose template and start this process remembers (the root span needs them
# when the sandbox ends, after the registry has let it go); the oldest are forgotten.
_KNOWN_MAX = 100_000
_ENDS = frozenset({EventKind.KILLED.value, EventKind.DIED.value,
                   EventKind.CREATE_FAILED.value})
_FAILED_ENDS = frozenset({EventKind.DIED.value, EventKind.CREATE_FAILED.value})
# Process fields with a name in OpenTelemetry's semantic conventions.
_PROCESS_SEMCONV = {"pid": "process.pid", "cmd": "process.command_line",
                    "user": "process.owner", "cwd": "process.working_directory",
                    "exit_code": "process.exit.code"}
_NAMED = {EventKind.STARTED.value: "sandbox.start", EventKind.PAUSED.value: "sandbox.pause",
          EventKind.RESUMED.value: "sandbox.resume",
          EventKind.CHECKPOINTED.value: "sandbox.checkpoint",
          EventKind.SNAPSHOT_TAKEN.value: "sandbox.checkpoint"}


@dataclass(frozen=True)
class SpanData:
    """One finished span: ids are the OTLP ones (128-bit trace, 64-bit span), times in
    nanoseconds since the epoch; ``error`` sets the span's status to error with it."""

    name: str
    trace_id: int
    span_id: int
    parent_id: int | None
    start_ns: int
    end_ns: int
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    error: str | None = None


def trace_id_of(sandbox_id: str) -> int:
    """The sandbox's trace id (never 0, which OTLP reserves)."""
    return _digest(sandbox_id)[0]


def root_span_id_of(sandbox_id: str) -> int:
    """The span id of the sandbox's root span (never 0)."""
    return _digest(sandbox_id)[1]


def _digest(sandbox_id: str) -> tuple[int, int]:
    raw = hashlib.sha256(b"bac sandbox trace\0" + sandbox_id.encode()).digest()
    return (int.from_bytes(raw[:16], "big") or 1), (int.from_bytes(raw[16:24], "big") or 1)


def _ns(at: datetime) -> int:
    return (at - _EPOCH) // timedelta(microseconds=1) * 1000


def _ms(value: Any) -> float:
    """A duration field in milliseconds (reports send numbers, lifecycle events text)."""
    try:
        found = float(value)
    except (TypeError, ValueError):
        return 0.0
    return found if 0 <= found < 1e12 else 0.0


_SCALARS = (bool, int, float)


def _value(value: Any) -> AttributeValue | None:
    # Exact types, not isinstance against unions: this runs for every field of every event.
    kind = type(value)
    if kind is str:
        text: str = value
        return text if len(text) <= _TEXT else text[:_TEXT]
    if kind in _SCALARS:
        scalar: bool | int | float = value
        return scalar
    if value is None:
        return None
    if kind is list or kind is tuple:
        return tuple(str(v)[:_TEXT] for v in value)
    return json.dumps(value, default=str)[:_TEXT]


@dataclass(frozen=True)
class _Known:
    template: str
    started_ns: int


class SandboxSpans:
    """Turns logged events into spans. Called from one thread (the export's): what it
    reads of the registry, one sandbox by id, is a single dict read."""

    def __init__(self, registry: Registry | None = None) -> None:
        self._registry = registry
        self._known: OrderedDict[str, _Known] = OrderedDict()
        # Ids, not secrets (the SDK draws its own the same way).
        self._random = random.Random()  # noqa: S311

    def watch(self, registry: Registry) -> None:
        """Read templates and start times of live sandboxes from ``registry``."""
        self._registry = registry

    def spans(self, events: Sequence[EventRecord]) -> list[SpanData]:
        out: list[SpanData] = []
        for record in events:
            span = self._span(record)
            if span is not None:
                out.append(span)
        return out

    def _span(self, record: EventRecord) -> SpanData | None:
        known = self._learn(record)
        kind, fields = record.kind, record.fields
        at = _ns(record.at)
        base = self._base(record, known)
        trace_id, root_id = _digest(record.sandbox_id)
        if kind in _ENDS or (kind == EventKind.TIMEOUT.value and "mode" not in fields):
            self._known.pop(record.sandbox_id, None)
            base["bac.sandbox.end"] = kind
            if "reason" in fields:
                base["bac.sandbox.end_reason"] = str(fields["reason"])
            start = known.started_ns if known is not None else at
            return SpanData(ROOT, trace_id, root_id, None, min(start, at), at, base,
                            record.message[:_TEXT] if kind in _FAILED_ENDS else None)
        start, end, error = at, at, None
        if kind == EventKind.PROCESS.value:
            name = "process"
            start, end, error = self._process(fields, at, base)
        elif kind == EventKind.TRANSFER.value:
            name = f"files.{fields.get('direction', 'transfer')}"
            start = at - int(_ms(fields.get("duration_ms")) * 1e6)
            self._fields(base, "bac.transfer.", fields)
            if not fields.get("ok", False):
                error = f"transfer failed ({fields.get('status', 0)})"
        else:
            name = _NAMED.get(kind, f"sandbox.{kind}")
            if kind == EventKind.TIMEOUT.value:  # one that paused (autoPause)
                name = "sandbox.pause"
            if kind == EventKind.NETWORK.value:
                start = at - int(_ms(fields.get("interval_s")) * 1e9)
            elif "duration_ms" in fields:
                start = at - int(_ms(fields["duration_ms"]) * 1e6)
            elif "total_ms" in fields:
                start = at - int(_ms(fields["total_ms"]) * 1e6)
            self._fields(base, "bac.event.", fields)
            base["bac.event.message"] = record.message[:_TEXT]
            if record.level == "error":
                error = record.message[:_TEXT]
        if known is not None:
            # Durations measured apart from the wall clock (and rounded) may reach a hair
            # before the create: a child never starts before its sandbox.
            start = max(start, known.started_ns)
        return SpanData(name, trace_id, self._random.getrandbits(64) or 1, root_id, start,
                        max(start, end), base, error)

    def _process(self, fields: Mapping[str, Any], at: int,
                 attributes: dict[str, AttributeValue]) -> tuple[int, int, str | None]:
        took = int(_ms(fields.get("duration_ms")) * 1e6)
        began = fields.get("started_at")
        # The sandbox's clock is the host's (namespaces share it): its start stands;
        # without one, the process ended when its report came.
        start = int(float(began) * 1e9) if isinstance(began, int | float) and began > 0 \
            else at - took
        semconv = _PROCESS_SEMCONV
        for name, value in fields.items():
            found = _value(value)
            if found is not None and name != "kind":
                attributes[semconv.get(name) or "bac.process." + name] = found
        error: str | None = None
        if "signal" in fields:
            error = f"killed by signal {fields['signal']}"
        elif fields.get("exit_code", 0) != 0:
            error = f"exited {fields['exit_code']}"
        if fields.get("timed_out"):
            error = (error or "ended") + " (its timeout)"
        return start, start + took, error

    @staticmethod
    def _fields(attributes: dict[str, AttributeValue], prefix: str,
                fields: Mapping[str, Any]) -> None:
        for name, value in fields.items():
            found = _value(value)
            if name != "kind" and found is not None:
                attributes[prefix + name] = found

    def _base(self, record: EventRecord, known: _Known | None) -> dict[str, AttributeValue]:
        attributes: dict[str, AttributeValue] = {
            "bac.sandbox.id": record.sandbox_id, "bac.team.id": record.team_id,
            "bac.event.kind": record.kind, "bac.event.level": record.level}
        if known is not None and known.template:
            attributes["bac.template.id"] = known.template
        for key, value in record.metadata.items():
            attributes[f"bac.metadata.{key}"] = value[:_TEXT]
        return attributes

    def _learn(self, record: EventRecord) -> _Known | None:
        """What this process knows of the record's sandbox: from its ``created`` event,
        else the registry (a sandbox re-attached after a restart)."""
        sandbox_id = record.sandbox_id
        known = self._known.get(sandbox_id)
        if known is not None:
            return known
        if record.kind == EventKind.CREATED.value:
            known = _Known(str(record.fields.get("template", "")), _ns(record.at))
        elif self._registry is not None and (sbx := self._registry.get(sandbox_id)) is not None:
            known = _Known(sbx.template_id, _ns(sbx.started_at))
        else:
            return None
        self._known[sandbox_id] = known
        while len(self._known) > _KNOWN_MAX:
            self._known.popitem(last=False)
        return known
