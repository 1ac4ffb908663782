"""The trace's spans over OTLP/HTTP, through the OpenTelemetry SDK (imported only when an
endpoint is configured: :func:`._export.otlp_export`).

The events are already what happened, with their own times and ids (:mod:`._spans`), so
each becomes a finished :class:`ReadableSpan` handed straight to the SDK's
:class:`BatchSpanProcessor`, not a span started and ended through a tracer (which would
stamp the time of the call and an id of its own). The event loop only appends each
committed batch of events to an inbox; the export's own thread makes their spans (about
20 us an event here, which would otherwise be the loop's) and hands them to the
processor, whose worker thread encodes and sends them.

The backlog (inbox and processor) is bounded: events that would overflow it are dropped
here, counted, rather than letting the processor evict older spans unseen; the
exporter's outcomes are counted too (:class:`SpanCounts`), so the operator sees what the
receiver did not get.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Sequence
from importlib import metadata

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

from bac_server.store import EventRecord

from ..sandboxes import Registry
from ._export import OtlpSettings, SpanCounts
from ._spans import SandboxSpans, SpanData

log = logging.getLogger(__name__)

_WARN_EVERY_S = 60.0
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_UNSET = Status(StatusCode.UNSET)


def _version() -> str:
    try:
        return metadata.version("bac")
    except metadata.PackageNotFoundError:
        return "unknown"


class _Counting(SpanExporter):
    """The OTLP exporter, its outcomes counted (called from the processor's thread)."""

    def __init__(self, inner: OTLPSpanExporter, endpoint: str) -> None:
        self._inner = inner
        self._endpoint = endpoint
        self.exported = 0
        self.failed = 0
        self._warned_at = -_WARN_EVERY_S
        self._down = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self._inner.export(spans)
        except Exception:
            log.exception("exporting %d spans to %s failed", len(spans), self._endpoint)
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            self.exported += len(spans)
            return result
        self.failed += len(spans)
        now = time.monotonic()
        if now - self._warned_at >= _WARN_EVERY_S:
            self._warned_at = now
            log.warning("OTLP export to %s failed: %d spans lost so far (%d delivered)",
                        self._endpoint, self.failed, self.exported)
        return result

    def shutdown(self) -> None:
        """Stop at once: retries under way give up (idempotent)."""
        if not self._down:
            self._down = True
            self._inner.shutdown()  # type: ignore[no-untyped-call]

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._inner.force_flush(timeout_millis)


class OtlpExport:
    """:class:`._export.SpanExport` over OTLP/HTTP. The SDK's pipeline (its exporter and
    the processor's worker thread) exists from :meth:`start` to :meth:`close`."""

    def __init__(self, settings: OtlpSettings) -> None:
        self._settings = settings
        self._spans = SandboxSpans()
        self._exporter: _Counting | None = None
        self._processor: BatchSpanProcessor | None = None
        self._resource = Resource.create({
            "service.name": settings.service_name, "service.version": _version(),
            "host.name": socket.gethostname()})
        self._scope = InstrumentationScope("bac_server.control.telemetry", _version())
        # Batches of events the loop handed over, mapped and emitted by the export's own
        # thread. Each count below is written by one thread only: the loop's ``received``
        # and ``dropped``, the thread's ``mapped`` and ``handed`` (spans given the
        # processor), so none needs a lock.
        self._inbox: deque[Sequence[EventRecord]] = deque()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._received = 0
        self._dropped = 0
        self._mapped = 0
        self._handed = 0
        self._closed = False
        self._failing = False

    def watch(self, registry: Registry) -> None:
        self._spans.watch(registry)

    def start(self) -> None:
        if self._processor is not None or self._closed:
            return
        s = self._settings
        self._exporter = _Counting(OTLPSpanExporter(endpoint=s.endpoint, timeout=s.timeout_s),
                                   s.endpoint)
        # Room for a batch beyond the bound this class keeps (:meth:`logged`), so the
        # processor itself never has to drop.
        self._processor = BatchSpanProcessor(
            self._exporter, max_queue_size=s.queue_size + s.batch_size,
            schedule_delay_millis=s.schedule_s * 1000, max_export_batch_size=s.batch_size,
            export_timeout_millis=s.timeout_s * 1000)
        self._thread = threading.Thread(target=self._map_forever, args=(self._processor,),
                                        name="bac-otlp-spans", daemon=True)
        self._thread.start()
        log.info("exporting sandbox traces over OTLP to %s", s.endpoint)

    def logged(self, events: Sequence[EventRecord]) -> None:
        """On the loop: an append and a wake-up; the spans are made on the export's
        thread (:meth:`_map_forever`)."""
        if self._thread is None or self._closed or not events:
            return
        room = self._settings.queue_size - self._backlog()
        if room < len(events):
            self._dropped += len(events) - max(room, 0)
            events = events[:max(room, 0)]
            if not events:
                return
        self._inbox.append(events)
        self._received += len(events)
        self._wake.set()

    def _backlog(self) -> int:
        """Events and spans not yet exported or failed."""
        exporter = self._exporter
        done = 0 if exporter is None else exporter.exported + exporter.failed
        return self._received - self._mapped + self._handed - done

    def _map_forever(self, processor: BatchSpanProcessor) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            while self._inbox:
                events = self._inbox.popleft()
                try:
                    for data in self._spans.spans(events):
                        processor.on_end(self._readable(data))
                        self._handed += 1
                    self._failing = False
                except Exception:
                    if not self._failing:  # once per run of failures, not per batch
                        self._failing = True
                        log.exception("turning %d events into spans failed", len(events))
                finally:
                    self._mapped += len(events)
            if self._closed:
                return

    def _readable(self, data: SpanData) -> ReadableSpan:
        context = SpanContext(data.trace_id, data.span_id, is_remote=False,
                              trace_flags=_SAMPLED)
        parent = None if data.parent_id is None else SpanContext(
            data.trace_id, data.parent_id, is_remote=False, trace_flags=_SAMPLED)
        status = _UNSET if data.error is None else Status(StatusCode.ERROR, data.error)
        return ReadableSpan(name=data.name, context=context, parent=parent,
                            resource=self._resource, attributes=data.attributes,
                            status=status, start_time=data.start_ns, end_time=data.end_ns,
                            instrumentation_scope=self._scope)

    def counts(self) -> SpanCounts:
        exporter = self._exporter
        exported = failed = 0
        if exporter is not None:
            exported, failed = exporter.exported, exporter.failed
        return SpanCounts(exported=exported, failed=failed, dropped=self._dropped,
                          pending=max(0, self._backlog()))

    async def close(self) -> None:
        self._closed = True
        processor, exporter, mapper = self._processor, self._exporter, self._thread
        if processor is None or exporter is None or mapper is None:
            return
        self._processor = None
        self._wake.set()  # the thread maps what is left, then ends
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def finished() -> None:
            if not done.done():
                done.set_result(None)

        def shut() -> None:
            try:
                mapper.join()
                # Sends what is queued, then stops its thread.
                processor.shutdown()  # type: ignore[no-untyped-call]
            except Exception:
                log.exception("shutting the OTLP export down failed")
            finally:
                with contextlib.suppress(RuntimeError):  # the loop is gone
                    loop.call_soon_threadsafe(finished)

        # Its own thread, not the loop's executor: a receiver that does not answer must
        # not hold the loop's shutdown, which waits for the executor's threads.
        threading.Thread(target=shut, name="bac-otlp-close", daemon=True).start()
        try:
            await asyncio.wait_for(asyncio.shield(done), self._settings.close_bound_s)
        except TimeoutError:
            exporter.shutdown()  # retries under way give up; the rest fail at once
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(done), 2.0)
        counts = self.counts()
        if counts.failed or counts.dropped or counts.pending:
            log.warning("OTLP export to %s: %d spans delivered, %d lost, %d dropped (queue "
                        "full), %d not sent at shutdown", self._settings.endpoint,
                        counts.exported, counts.failed, counts.dropped, counts.pending)
