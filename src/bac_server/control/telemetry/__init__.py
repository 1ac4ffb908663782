"""Prometheus metrics of the control plane and the gateway, and the trace's OTLP export
(docs/observability.md).

* ``_instruments``: ``Telemetry``, the instruments in their own registry and what records
  into them; ``MetricLimits``.
* ``_fleet``: the collector a scrape reads the control plane's registry through
  (sandboxes by state, template, team) and the spend meter (vCPU- and GiB-seconds).
* ``_labels``: ``LabelCap``, bounded label values.

And the trace exported as OpenTelemetry spans (docs/observability.md, "OTLP export"):

* ``_spans``: ``SandboxSpans``, what each event of the log becomes as a span.
* ``_export``: ``OtlpSettings``, ``SpanCounts``, the ``SpanExport`` seam and
  ``otlp_export``, which imports the SDK only when it is called.
* ``_otlp``: ``OtlpExport``, the spans through the OpenTelemetry SDK's batch processor and
  OTLP/HTTP exporter (never imported here).
"""

from ._export import OtlpSettings, SpanCounts, SpanExport, otlp_export
from ._instruments import CONNECT_CODES, CREATE_PATHS, MetricLimits, Telemetry
from ._labels import OTHER, LabelCap
from ._spans import SandboxSpans, SpanData, root_span_id_of, trace_id_of

__all__ = ["CONNECT_CODES", "CREATE_PATHS", "OTHER", "LabelCap", "MetricLimits",
           "OtlpSettings", "SandboxSpans", "SpanCounts", "SpanData", "SpanExport",
           "Telemetry", "otlp_export", "root_span_id_of", "trace_id_of"]
