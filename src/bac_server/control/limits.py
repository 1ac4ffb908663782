"""Limits and defaults the control plane enforces, filled in by the composition root, and
the one check of each bound that more than one request asks for (a sandbox's and a build's
resources, a timeout); each raises ``InvalidRequest`` naming the bound."""

from __future__ import annotations

from dataclasses import dataclass

from bac_server.control.errors import InvalidRequest


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

    def cpus(self, requested: int | None) -> int:
        """The vCPUs asked for (the default when None), within bounds."""
        cpus = self.default_cpu_count if requested is None else requested
        if not 1 <= cpus <= self.max_cpu_count:
            raise InvalidRequest(f"cpuCount must be between 1 and {self.max_cpu_count}, "
                                 f"got {cpus}")
        return cpus

    def memory(self, requested: int | None) -> int:
        """The memory asked for in MiB (the default when None), within bounds."""
        memory = self.default_memory_mb if requested is None else requested
        if not self.min_memory_mb <= memory <= self.max_memory_mb:
            raise InvalidRequest(f"memoryMB must be between {self.min_memory_mb} and "
                                 f"{self.max_memory_mb}, got {memory}")
        return memory

    def timeout(self, requested: int | None, what: str = "timeout", *,
                zero: bool = True) -> int:
        """The seconds asked for (the default timeout when None), at most the longest
        timeout; 0 only where it means "now" (``zero``)."""
        seconds = self.default_timeout_s if requested is None else requested
        if zero and not 0 <= seconds <= self.max_timeout_s:
            raise InvalidRequest(f"{what} must be between 0 and {self.max_timeout_s} "
                                 f"seconds, got {seconds}")
        if not zero and not 0 < seconds <= self.max_timeout_s:
            raise InvalidRequest(f"{what} must be greater than 0 and at most "
                                 f"{self.max_timeout_s} seconds, got {seconds}")
        return seconds
