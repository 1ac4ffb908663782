"""The current schema, as SQLAlchemy Core tables used by the queries of this package.

Migrations in :mod:`.migrations` build this schema step by step; a test checks that a freshly
migrated database has exactly these tables and columns. Times are stored as float seconds
since the epoch (UTC): sortable and identical on SQLite and PostgreSQL. Env vars and
access tokens are stored sealed (:mod:`bac_server.store.sealing`, migration 4): the
``*_access_token`` columns hold sealed text, the ``env_vars`` columns a JSON string of
sealed text.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

# Ids that only grow: 64-bit (migration 10 on PostgreSQL); on SQLite an INTEGER primary
# key is the 64-bit rowid, and must be spelt INTEGER to be one.
Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

teams = sa.Table(
    "teams",
    metadata,
    sa.Column("team_id", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    sa.Column("created_at", sa.Float, nullable=False),
)

api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("key_id", sa.String(64), primary_key=True),
    sa.Column("team_id", sa.String(64), sa.ForeignKey("teams.team_id"), nullable=False),
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("prefix", sa.String(32), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("revoked_at", sa.Float, nullable=True),
)

sandboxes = sa.Table(
    "sandboxes",
    metadata,
    sa.Column("sandbox_id", sa.String(64), primary_key=True),
    sa.Column("team_id", sa.String(64), sa.ForeignKey("teams.team_id"), nullable=False),
    sa.Column("template_id", sa.String(255), nullable=False),
    sa.Column("alias", sa.String(255), nullable=True),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("end_at", sa.Float, nullable=False),
    sa.Column("ended_at", sa.Float, nullable=True),
    sa.Column("cpu_count", sa.Integer, nullable=False),
    sa.Column("memory_mb", sa.Integer, nullable=False),
    sa.Column("disk_mb", sa.Integer, nullable=False),
    sa.Column("envd_access_token", sa.String(128), nullable=False),
    sa.Column("traffic_access_token", sa.String(128), nullable=True),
    sa.Column("metadata", sa.JSON, nullable=False),
    sa.Column("env_vars", sa.JSON, nullable=False),
    sa.Column("network", sa.JSON, nullable=True),
    sa.Column("allow_internet_access", sa.Boolean, nullable=True),
    sa.Column("lifecycle", sa.JSON, nullable=True),
    sa.Column("key_name", sa.String(255), nullable=True),
)

checkpoints = sa.Table(
    "checkpoints",
    metadata,
    sa.Column("checkpoint_id", sa.String(64), primary_key=True),
    sa.Column("team_id", sa.String(64), nullable=False, index=True),
    sa.Column("sandbox_id", sa.String(64), nullable=False, index=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("name", sa.String(255), nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("size_bytes", sa.BigInteger, nullable=False),
    sa.Column("memory", sa.Boolean, nullable=False),
    sa.Column("template_id", sa.String(255), nullable=False),
    sa.Column("envd_access_token", sa.String(128), nullable=False),
    sa.Column("cpu_count", sa.Integer, nullable=False),
    sa.Column("memory_mb", sa.Integer, nullable=False),
    sa.Column("env_vars", sa.JSON, nullable=False),
)

sandbox_events = sa.Table(
    "sandbox_events",
    metadata,
    sa.Column("event_id", Id, primary_key=True, autoincrement=True),
    sa.Column("sandbox_id", sa.String(64), nullable=False, index=True),
    sa.Column("team_id", sa.String(64), nullable=False),
    sa.Column("at", sa.Float, nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("level", sa.String(8), nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("fields", sa.JSON, nullable=False),
    # The event's type on the events API and webhooks (None: not one of theirs).
    sa.Column("wire_type", sa.String(64), nullable=True),
    # The sandbox's metadata when the event was written (migration 5).
    sa.Column("metadata", sa.JSON, nullable=True),
    sa.Index("ix_sandbox_events_team", "team_id", "event_id"),
    sa.Index("ix_sandbox_events_sandbox", "sandbox_id", "event_id"),
    sa.Index("ix_sandbox_events_at", "at"),
)

sandbox_metrics = sa.Table(
    "sandbox_metrics",
    metadata,
    sa.Column("sample_id", Id, primary_key=True, autoincrement=True),
    sa.Column("sandbox_id", sa.String(64), nullable=False, index=True),
    sa.Column("at", sa.Float, nullable=False, index=True),
    sa.Column("cpu_count", sa.Integer, nullable=False),
    sa.Column("cpu_used_pct", sa.Float, nullable=False),
    sa.Column("mem_used", sa.BigInteger, nullable=False),
    sa.Column("mem_total", sa.BigInteger, nullable=False),
    sa.Column("mem_cache", sa.BigInteger, nullable=False),
    sa.Column("disk_used", sa.BigInteger, nullable=False),
    sa.Column("disk_total", sa.BigInteger, nullable=False),
)

# Templates (migration 3) -----------------------------------------------------------------
templates = sa.Table(
    "templates",
    metadata,
    sa.Column("template_id", sa.String(64), primary_key=True),
    sa.Column("team_id", sa.String(64), nullable=False, index=True),
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("public", sa.Boolean, nullable=False),
    sa.Column("aliases", sa.JSON, nullable=False),
    sa.Column("cpu_count", sa.Integer, nullable=True),
    sa.Column("memory_mb", sa.Integer, nullable=True),
    sa.Column("disk_mb", sa.Integer, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("build_count", sa.Integer, nullable=False),
    sa.Column("spawn_count", sa.Integer, nullable=False),
    sa.Column("last_spawned_at", sa.Float, nullable=True),
    sa.UniqueConstraint("team_id", "name", name="uq_templates_team_name"),
)

template_builds = sa.Table(
    "template_builds",
    metadata,
    sa.Column("build_id", sa.String(64), primary_key=True),
    sa.Column("template_id", sa.String(64), nullable=False, index=True),
    sa.Column("team_id", sa.String(64), nullable=False),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("started_at", sa.Float, nullable=True),
    sa.Column("finished_at", sa.Float, nullable=True),
    sa.Column("cpu_count", sa.Integer, nullable=True),
    sa.Column("memory_mb", sa.Integer, nullable=True),
    sa.Column("disk_mb", sa.Integer, nullable=True),
    sa.Column("tags", sa.JSON, nullable=False),
    sa.Column("recipe", sa.JSON, nullable=True),
    sa.Column("digest", sa.String(128), nullable=True),
    sa.Column("config", sa.JSON, nullable=True),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("reason_step", sa.String(32), nullable=True),
)

# Bounded per build by the writer (control.builds.MAX_LINES).
template_build_logs = sa.Table(
    "template_build_logs",
    metadata,
    sa.Column("build_id", sa.String(64), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("at", sa.Float, nullable=False),
    sa.Column("level", sa.String(8), nullable=False),
    sa.Column("step", sa.String(32), nullable=True),
    sa.Column("message", sa.Text, nullable=False),
)

template_tags = sa.Table(
    "template_tags",
    metadata,
    sa.Column("template_id", sa.String(64), primary_key=True),
    sa.Column("tag", sa.String(128), primary_key=True),
    sa.Column("build_id", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

template_uploads = sa.Table(
    "template_uploads",
    metadata,
    sa.Column("team_id", sa.String(64), primary_key=True),
    sa.Column("files_hash", sa.String(128), primary_key=True),
    sa.Column("path", sa.Text, nullable=False),
    sa.Column("size_bytes", sa.BigInteger, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

sandbox_templates = sa.Table(
    "sandbox_templates",
    metadata,
    sa.Column("sandbox_id", sa.String(64), primary_key=True),
    sa.Column("template_id", sa.String(64), nullable=False),
    sa.Column("build_id", sa.String(64), nullable=False),
    sa.Column("digest", sa.String(128), nullable=False),
)

webhooks = sa.Table(
    "webhooks",
    metadata,
    sa.Column("webhook_id", sa.String(64), primary_key=True),
    sa.Column("team_id", sa.String(64), nullable=False, index=True),
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("events", sa.JSON, nullable=False),
    sa.Column("enabled", sa.Boolean, nullable=False),
    sa.Column("secret", sa.Text, nullable=False),  # sealed
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

webhook_deliveries = sa.Table(
    "webhook_deliveries",
    metadata,
    sa.Column("seq", Id, primary_key=True, autoincrement=True),
    sa.Column("delivery_id", sa.String(64), nullable=False, unique=True),
    sa.Column("webhook_id", sa.String(64), nullable=False),
    sa.Column("team_id", sa.String(64), nullable=False),
    sa.Column("event_id", Id, nullable=False),
    sa.Column("event_type", sa.String(64), nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("next_attempt_at", sa.Float, nullable=False),
    sa.Column("last_attempt_at", sa.Float, nullable=True),
    sa.Column("delivered_at", sa.Float, nullable=True),
    sa.Column("response_code", sa.Integer, nullable=True),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Column("duration_ms", sa.Integer, nullable=True),
    sa.UniqueConstraint("webhook_id", "event_id", name="uq_webhook_deliveries_event"),
    sa.Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),
    sa.Index("ix_webhook_deliveries_webhook", "webhook_id", "seq"),
)

webhook_cursor = sa.Table(
    "webhook_cursor",
    metadata,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("value", Id, nullable=False),
)

# Migration 7: what the meter accrued per sandbox and UTC day (control.metering).
usage_days = sa.Table(
    "usage_days",
    metadata,
    sa.Column("sandbox_id", sa.String(64), primary_key=True),
    sa.Column("day", sa.String(10), primary_key=True),
    sa.Column("team_id", sa.String(64), nullable=False),
    sa.Column("vcpu_seconds", sa.Float, nullable=False),
    sa.Column("memory_gib_seconds", sa.Float, nullable=False),
    sa.Column("storage_gib_hours", sa.Float, nullable=False),
    sa.Column("cpu_used_seconds", sa.Float, nullable=False),
    sa.Column("metered_until", sa.Float, nullable=False),
    # The sandbox's CPU counter (s) read at metered_until (NULL: not read).
    sa.Column("cpu_mark", sa.Float, nullable=True),
    sa.Index("ix_usage_days_team", "team_id", "day"),
)

cost_caps = sa.Table(
    "cost_caps",
    metadata,
    sa.Column("cap_id", sa.String(64), primary_key=True),
    sa.Column("team_id", sa.String(64), nullable=False, index=True),
    sa.Column("scope", sa.String(16), nullable=False),
    sa.Column("period", sa.String(16), nullable=False),
    sa.Column("amount", sa.Float, nullable=False),
    sa.Column("action", sa.String(16), nullable=False),
    sa.Column("sandbox_id", sa.String(64), nullable=True, index=True),
    sa.Column("metadata_key", sa.String(255), nullable=True),
    sa.Column("metadata_value", sa.Text, nullable=True),
    sa.Column("warned", sa.String(16), nullable=True),
    sa.Column("reached", sa.String(16), nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

# Migration 11: artefacts promoted out of sandboxes (control.artefacts), unique per
# (team, run, name); the blob is ``<data>/artefacts/<sha256>``.
artefacts = sa.Table(
    "artefacts",
    metadata,
    sa.Column("team_id", sa.String(64), primary_key=True),
    sa.Column("run_id", sa.String(255), primary_key=True),
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("sha256", sa.String(64), nullable=False, index=True),
    sa.Column("size_bytes", sa.BigInteger, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("sandbox_id", sa.String(64), nullable=False),
    sa.Column("source_path", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False, index=True),
)

# Migration 12: volumes (control.volumes), unique per (team, name), the content API's
# token sealed; the volumes each sandbox mounts, one row per (sandbox, path).
volumes = sa.Table(
    "volumes",
    metadata,
    sa.Column("volume_id", sa.String(64), primary_key=True),
    sa.Column("team_id", sa.String(64), nullable=False),
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("token", sa.Text, nullable=False),
    sa.Column("size_mb", sa.BigInteger, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.UniqueConstraint("team_id", "name", name="uq_volumes_team_name"),
)
volume_mounts = sa.Table(
    "volume_mounts",
    metadata,
    sa.Column("sandbox_id", sa.String(64), primary_key=True),
    sa.Column("path", sa.String(4096), primary_key=True),
    sa.Column("volume_id", sa.String(64), nullable=False, index=True),
    sa.Column("team_id", sa.String(64), nullable=False),
)

# Migration 13: a team's secrets (E2B's Secret), unique per (team, name); ``value`` is
# sealed (the current version's only).
secrets = sa.Table(
    "secrets",
    metadata,
    sa.Column("secret_id", sa.String(64), primary_key=True),
    sa.Column("team_id", sa.String(64), nullable=False),
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("metadata", sa.Text, nullable=False),
    sa.Column("value", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.UniqueConstraint("team_id", "name", name="uq_secrets_team_name"),
    sa.Index("ix_secrets_team_created", "team_id", "created_at"),
)

# Migration 14: node agents and what is placed on them (docs/scale-out.md).
nodes = sa.Table(
    "nodes",
    metadata,
    sa.Column("node_id", sa.String(64), primary_key=True),
    sa.Column("address", sa.String(255), nullable=False),
    sa.Column("rpc_port", sa.Integer, nullable=False),
    sa.Column("tunnel_port", sa.Integer, nullable=False),
    sa.Column("vcpus", sa.Integer, nullable=False),
    sa.Column("memory_mb", sa.BigInteger, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("heartbeat_at", sa.Float, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("version", sa.String(64), nullable=False),
    sa.Column("sandboxes", sa.Integer, nullable=False),
)
# A lifecycle step in progress on a sandbox, by the replica (``owner``: its origin) that
# holds it until ``until`` (epoch seconds; renewed while it lasts).
sandbox_steps = sa.Table(
    "sandbox_steps",
    metadata,
    sa.Column("sandbox_id", sa.String(64), primary_key=True),
    sa.Column("owner", sa.String(64), nullable=False),
    sa.Column("until", sa.Float, nullable=False),
)
placements = sa.Table(
    "placements",
    metadata,
    sa.Column("object_id", sa.String(64), primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("node_id", sa.String(64), nullable=False, index=True),
    sa.Column("vcpus", sa.Integer, nullable=False),
    sa.Column("memory_mb", sa.BigInteger, nullable=False),
)
