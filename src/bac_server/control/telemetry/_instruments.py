"""The server's Prometheus instruments, in a registry of their own (not the client
library's global one): what the control plane and the gateway record as it happens, and
the fleet collector (:mod:`._fleet`) that reads the control plane at each scrape.

Every label has a bounded set of values: paths, kinds, outcomes and status classes are
fixed sets; teams and templates are capped (:class:`._labels.LabelCap`); sandbox ids are
never labels.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..clock import Clock
from ..sandboxes import Registry
from ._export import SpanCounts
from ._fleet import FleetCollector, SpendMeter
from ._labels import LabelCap

# How a sandbox was made: handed out by the ready pool, restored from its template's start
# snapshot, booted, or started from a checkpoint (snapshots and forks); ``unknown`` while
# the backend does not say.
CREATE_PATHS = ("pool", "start_snapshot", "boot", "checkpoint", "unknown")
BUILD_OUTCOMES = ("ready", "error", "cancelled")
# Connect's error codes (connectrpc.com/docs/protocol#error-codes); anything else: unknown.
CONNECT_CODES = frozenset({
    "canceled", "unknown", "invalid_argument", "deadline_exceeded", "not_found",
    "already_exists", "permission_denied", "resource_exhausted", "failed_precondition",
    "aborted", "out_of_range", "unimplemented", "internal", "unavailable", "data_loss",
    "unauthenticated"})
_FAST = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_SLOW = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


@dataclass(frozen=True)
class MetricLimits:
    """How many teams and templates get series of their own (the rest: ``other``)."""

    max_teams: int = 100
    max_templates: int = 100


class Telemetry:
    def __init__(self, limits: MetricLimits | None = None) -> None:
        limits = limits or MetricLimits()
        self.registry = CollectorRegistry(auto_describe=True)
        self.teams = LabelCap(limits.max_teams)
        self.templates = LabelCap(limits.max_templates)
        r = self.registry
        self._create = Histogram(
            "bac_sandbox_create_seconds", "Time to create a sandbox, by how it was made.",
            ["path", "template"], buckets=_FAST, registry=r)
        self._create_failed = Counter(
            "bac_sandbox_create_failures", "Sandbox creates that failed.", ["template"],
            registry=r)
        self._pause = Histogram(
            "bac_sandbox_pause_seconds", "Time to pause a sandbox, by kind of pause.",
            ["kind"], buckets=_FAST, registry=r)
        self._resume = Histogram(
            "bac_sandbox_resume_seconds", "Time to resume a sandbox, by kind of pause.",
            ["kind"], buckets=_FAST, registry=r)
        self.gateway_requests = Counter(
            "bac_gateway_requests", "Requests the gateway handled, by protocol and status "
            "class (1xx for an accepted WebSocket).", ["protocol", "status"], registry=r)
        self.gateway_bytes = Counter(
            "bac_gateway_bytes", "Body bytes through the gateway: in (to sandboxes), out.",
            ["direction"], registry=r)
        self.gateway_errors = Counter(
            "bac_gateway_errors", "Requests the gateway could not relay, by reason.",
            ["reason"], registry=r)
        self.envd_errors = Counter(
            "bac_envd_rpc_errors", "envd RPCs that ended in a Connect error, as the gateway "
            "saw them (status or end-of-stream message), by code.", ["code"], registry=r)
        self._builds = Histogram(
            "bac_template_build_seconds", "Template builds by outcome and how long they ran.",
            ["outcome"], buckets=_SLOW, registry=r)
        self._fleet: FleetCollector | None = None
        self.spend: SpendMeter | None = None
        for label in ("2xx", "3xx", "4xx", "5xx"):  # the common series exist from the start
            self.gateway_requests.labels("http", label)

    def watch(self, registry: Registry, clock: Clock) -> None:
        """Read ``registry`` at every scrape (sandboxes, spend); once."""
        assert self._fleet is None, "the telemetry already watches a registry"
        self.spend = SpendMeter(clock, self.teams)
        self._fleet = FleetCollector(registry, self.spend, teams=self.teams,
                                     templates=self.templates)
        registry.on_change(self.spend.changed)
        self.registry.register(self._fleet)

    def count_spans(self, counts: Callable[[], SpanCounts]) -> None:
        """Serve the trace's OTLP export's counts (read at each scrape); once."""
        self.registry.register(_SpanCollector(counts))

    def created(self, path: str, template: str, seconds: float) -> None:
        self._create.labels(path if path in CREATE_PATHS else "unknown",
                            self.templates(template)).observe(seconds)

    def create_failed(self, template: str) -> None:
        self._create_failed.labels(self.templates(template)).inc()

    def paused(self, kind: str, seconds: float) -> None:
        self._pause.labels(kind).observe(seconds)

    def resumed(self, kind: str, seconds: float) -> None:
        self._resume.labels(kind).observe(seconds)

    def build_finished(self, outcome: str, seconds: float) -> None:
        self._builds.labels(outcome if outcome in BUILD_OUTCOMES else "error").observe(seconds)

    def envd_error(self, code: str) -> None:
        self.envd_errors.labels(code if code in CONNECT_CODES else "unknown").inc()

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format (from the event loop: it reads the
        control plane's registry)."""
        return generate_latest(self.registry)


class _SpanCollector(Collector):
    def __init__(self, counts: Callable[[], SpanCounts]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[Metric]:
        counts = self._counts()
        spans = CounterMetricFamily(
            "bac_otlp_spans", "Trace spans of the OTLP export, by outcome: exported, failed "
            "(the receiver refused them or could not be reached), dropped (the queue was "
            "full).", labels=["outcome"])
        spans.add_metric(["exported"], counts.exported)
        spans.add_metric(["failed"], counts.failed)
        spans.add_metric(["dropped"], counts.dropped)
        yield spans
        yield GaugeMetricFamily("bac_otlp_spans_queued",
                                "Trace spans waiting to be exported over OTLP.",
                                value=counts.pending)
