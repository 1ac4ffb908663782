"""What a scrape reads from the control plane's registry as it is at that moment: sandboxes
by state, template and team, and the resources they were allocated while running (spend).

Nothing is counted by hand beside the registry: the gauge is computed from its sandboxes at
each scrape, and the spend meter accrues a running sandbox's vCPUs and memory for the time
since it was last accrued, at each scrape and at each change of a sandbox's state (the
registry tells it), on the control plane's clock.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..clock import Clock
from ..sandboxes import LiveSandbox, Registry, SandboxState
from ._labels import LabelCap

_GIB_PER_MIB = 1 / 1024


@dataclass
class _Running:
    team: str
    vcpus: int
    memory_gib: float
    since: datetime


class SpendMeter:
    """vCPU-seconds and GiB-seconds allocated to running sandboxes, per team (a counter:
    it only grows, also after the sandboxes end)."""

    def __init__(self, clock: Clock, teams: LabelCap) -> None:
        self._clock = clock
        self._teams = teams
        self._running: dict[str, _Running] = {}
        self.vcpu_seconds: defaultdict[str, float] = defaultdict(float)
        self.gib_seconds: defaultdict[str, float] = defaultdict(float)

    def changed(self, sbx: LiveSandbox) -> None:
        """The registry's view of one sandbox changed (state, route)."""
        now = self._clock.now()
        found = self._running.get(sbx.sandbox_id)
        if sbx.state is SandboxState.RUNNING:
            if found is None:
                self._running[sbx.sandbox_id] = _Running(
                    self._teams(sbx.team_id), sbx.cpu_count, sbx.memory_mb * _GIB_PER_MIB, now)
            return
        if found is not None:
            self._accrue(found, now)
            del self._running[sbx.sandbox_id]

    def gone(self, sandbox_id: str) -> None:
        found = self._running.pop(sandbox_id, None)
        if found is not None:
            self._accrue(found, self._clock.now())

    def accrue_all(self) -> None:
        now = self._clock.now()
        for running in self._running.values():
            self._accrue(running, now)

    def _accrue(self, running: _Running, now: datetime) -> None:
        seconds = max(0.0, (now - running.since).total_seconds())
        running.since = now
        self.vcpu_seconds[running.team] += running.vcpus * seconds
        self.gib_seconds[running.team] += running.memory_gib * seconds


class FleetCollector(Collector):
    def __init__(self, registry: Registry, spend: SpendMeter, *, teams: LabelCap,
                 templates: LabelCap) -> None:
        self._registry = registry
        self._spend = spend
        self._teams = teams
        self._templates = templates

    def collect(self) -> Iterator[Metric]:
        counts: Counter[tuple[str, str, str]] = Counter()
        for sbx in self._registry.all():
            counts[(sbx.state.value, self._templates(sbx.template_id),
                    self._teams(sbx.team_id))] += 1
        sandboxes = GaugeMetricFamily(
            "bac_sandboxes", "Sandboxes the control plane holds, by state, template and team.",
            labels=["state", "template", "team"])
        for (state, template, team), count in sorted(counts.items()):
            sandboxes.add_metric([state, template, team], count)
        yield sandboxes
        self._spend.accrue_all()
        vcpu = CounterMetricFamily(
            "bac_sandbox_vcpu_seconds", "vCPU-seconds allocated to running sandboxes, by team.",
            labels=["team"])
        memory = CounterMetricFamily(
            "bac_sandbox_memory_gib_seconds",
            "GiB-seconds of memory allocated to running sandboxes, by team.", labels=["team"])
        for team, value in sorted(self._spend.vcpu_seconds.items()):
            vcpu.add_metric([team], value)
        for team, value in sorted(self._spend.gib_seconds.items()):
            memory.add_metric([team], value)
        yield vcpu
        yield memory
