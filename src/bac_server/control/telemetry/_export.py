"""The export of the trace as OpenTelemetry spans, as the control plane sees it: its
settings, what it counts, the seam (:class:`SpanExport`) and the one way to make it.

Nothing here imports OpenTelemetry: :func:`otlp_export` imports the SDK (:mod:`._otlp`)
when it is called, which the composition root does only when an endpoint is configured,
so a server without one loads and starts nothing of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from bac_server.store import EventRecord

from ..sandboxes import Registry


@dataclass(frozen=True)
class OtlpSettings:
    """``endpoint``: the OTLP/HTTP traces URL spans are POSTed to (``…/v1/traces``).
    Headers, compression and TLS files come from the standard
    ``OTEL_EXPORTER_OTLP_[TRACES_]*`` variables, which the SDK's exporter reads."""

    endpoint: str
    timeout_s: float = 10.0  # one export, retries included
    queue_size: int = 8192  # spans waiting; beyond, new ones are dropped (counted)
    batch_size: int = 512
    schedule_s: float = 1.0  # a batch goes at least this often while spans wait
    service_name: str = "bac"

    @property
    def close_bound_s(self) -> float:
        """How long a shutdown waits for the last spans to go out."""
        return self.timeout_s + 5.0


@dataclass(frozen=True)
class SpanCounts:
    """Spans since start: delivered, refused or lost on the way (the receiver's error,
    a timeout), dropped before the queue (it was full), and waiting."""

    exported: int = 0
    failed: int = 0
    dropped: int = 0
    pending: int = 0


class SpanExport(Protocol):
    """Fed every event the log commits (the store's ``on_logged``), on the event loop;
    never blocks it, never raises."""

    def watch(self, registry: Registry) -> None:
        """Read live sandboxes' templates and start times from ``registry``."""
        ...

    def logged(self, events: Sequence[EventRecord]) -> None: ...

    def start(self) -> None: ...

    async def close(self) -> None:
        """Send what is queued (bounded wait), then stop; later events are ignored."""
        ...

    def counts(self) -> SpanCounts: ...


def otlp_export(settings: OtlpSettings) -> SpanExport:
    """The OTLP exporter (imports the OpenTelemetry SDK now)."""
    from ._otlp import OtlpExport

    return OtlpExport(settings)
