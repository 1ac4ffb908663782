"""Prometheus metrics of the control plane and the gateway (docs/observability.md).

* ``_instruments``: ``Telemetry``, the instruments in their own registry and what records
  into them; ``MetricLimits``.
* ``_fleet``: the collector a scrape reads the control plane's registry through
  (sandboxes by state, template, team) and the spend meter (vCPU- and GiB-seconds).
* ``_labels``: ``LabelCap``, bounded label values.
"""

from ._instruments import CONNECT_CODES, CREATE_PATHS, MetricLimits, Telemetry
from ._labels import OTHER, LabelCap

__all__ = ["CONNECT_CODES", "CREATE_PATHS", "OTHER", "LabelCap", "MetricLimits", "Telemetry"]
