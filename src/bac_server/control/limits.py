"""Limits and defaults the control plane enforces, filled in by the composition root, and
the one check of each bound that more than one request asks for (a sandbox's and a build's
resources, a timeout); each raises ``InvalidRequest`` naming the bound."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bac_server.control.errors import InvalidRequest

# The longest timeout there is without a cap (ten years): an end must stay a date; a
# sandbox meant to live for ever is created without one (timeout 0).
LONGEST_TIMEOUT_S = 10 * 365 * 86_400


@dataclass(frozen=True)
class Limits:
    default_timeout_s: int = 300
    # The longest timeout a request may ask for; 0: no cap (the default), and only then
    # may a sandbox be created without an end.
    max_timeout_s: int = 0
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
    # Teams' own default timeouts, by team id or name (0: their sandboxes have no end).
    team_default_timeouts: Mapping[str, int] = field(default_factory=dict)
    # The idle policy of a sandbox that asks for none: pause after this many seconds
    # without traffic (0: never), for sandboxes with an end and for those without; idle
    # means CPU under ``idle_cpu_pct`` % too.
    idle_after_s: int = 0
    idle_after_no_end_s: int = 900
    idle_cpu_pct: float = 5.0
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
                default: int | None = None) -> int:
        """The seconds asked for (``default``, else the default timeout, when None), at
        most the longest timeout when there is one. 0 is "now" where a step takes a time
        from now, "no end" at create (:meth:`lifetime`)."""
        fallback = self.default_timeout_s if default is None else default
        seconds = fallback if requested is None else requested
        if seconds < 0:
            raise InvalidRequest(f"{what} must be 0 or more seconds, got {seconds}")
        longest = self.max_timeout_s or LONGEST_TIMEOUT_S
        if seconds > longest:
            raise InvalidRequest(f"{what} must be at most {longest} seconds, got {seconds}")
        return seconds

    def default_timeout(self, team_id: str, team_name: str) -> int:
        """The timeout a team's create without one gets."""
        found = self.team_default_timeouts.get(team_id)
        if found is None:
            found = self.team_default_timeouts.get(team_name)
        return self.default_timeout_s if found is None else found

    def idle_default(self, *, has_end: bool) -> int:
        return self.idle_after_s if has_end else self.idle_after_no_end_s

    def lifetime(self, requested: int | None, *, default: int | None = None) -> int:
        """A new sandbox's timeout in seconds; 0 is a sandbox without an end, refused
        while the longest timeout is capped."""
        seconds = self.timeout(requested, default=default)
        if seconds == 0 and self.max_timeout_s:
            raise InvalidRequest(f"timeout 0 (no end) is refused: this server caps a "
                                 f"sandbox's timeout at {self.max_timeout_s} seconds")
        return seconds
