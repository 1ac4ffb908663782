"""Limits and defaults the control plane enforces, filled in by the composition root."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    default_timeout_s: int = 300
    max_timeout_s: int = 86_400
    default_cpu_count: int = 2
    default_memory_mb: int = 512
    default_disk_mb: int = 10_240
    max_cpu_count: int = 8
    min_memory_mb: int = 64
    max_memory_mb: int = 8_192
    max_sandboxes_per_team: int = 100
    max_metadata_entries: int = 64
    max_env_vars: int = 256
    max_key_bytes: int = 256
    max_value_bytes: int = 4_096
    # Disk all of a team's checkpoints and snapshots may use (0: no limit).
    max_checkpoint_bytes_per_team: int = 20 * 1024**3
    # Scheduled checkpoints: the shortest interval, and how many a schedule may keep.
    min_checkpoint_interval_s: int = 60
    max_checkpoints_kept: int = 100
