"""Check a sandbox request against the backend's maxima before anything is made."""

from __future__ import annotations

import re

from bac_server.backends.base import ResourceLimitError, SandboxSetupError, SandboxSpec

from .._config import NamespaceConfig
from ._disk import MIN_DISK_MB
from ._ocispec import Limits

# A DNS label: it becomes the hostname.
_SANDBOX_ID = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MIN_PIDS = 16
# A sandbox's pids limit grows with its memory: a floor for the shell, envd and a few
# services, plus 4 per MiB. Each task costs the kernel ~26 KiB (stack and task struct),
# so 4 per MiB keep what its tasks pin in the kernel near a tenth of the memory it pays
# for, and many small sandboxes cannot together hold the host's task table: 2304 for the
# default 512 MiB, 768 for 128 MiB, the request's pids_max above that.
PIDS_FLOOR = 256
PIDS_PER_MIB = 4


def pids_for(memory_mb: int, pids_max: int) -> int:
    """The pids limit of a sandbox (or build step) of ``memory_mb``, at most ``pids_max``."""
    return min(pids_max, PIDS_FLOOR + PIDS_PER_MIB * memory_mb)


def check_resources(config: NamespaceConfig, vcpus: int, memory_mb: int) -> None:
    """Raise ResourceLimitError naming the limit ``vcpus`` or ``memory_mb`` is beyond (a
    sandbox's, a build step's)."""
    if not 1 <= vcpus <= config.max_vcpus:
        raise ResourceLimitError(f"vcpus must be 1..{config.max_vcpus}, got {vcpus}")
    if not config.min_memory_mb <= memory_mb <= config.max_memory_mb:
        raise ResourceLimitError(f"memory_mb must be {config.min_memory_mb}.."
                                 f"{config.max_memory_mb}, got {memory_mb}")


def validate(config: NamespaceConfig, spec: SandboxSpec, limit_swap: bool) -> Limits:
    """The cgroup limits for ``spec``; raises ResourceLimitError naming the limit."""
    if not _SANDBOX_ID.match(spec.sandbox_id):
        raise SandboxSetupError(f"invalid sandbox id {spec.sandbox_id!r}")
    check_resources(config, spec.vcpus, spec.memory_mb)
    if not MIN_DISK_MB <= spec.disk_mb <= config.max_disk_mb:
        raise ResourceLimitError(f"disk_mb must be {MIN_DISK_MB}..{config.max_disk_mb}, "
                                 f"got {spec.disk_mb}")
    if not MIN_PIDS <= spec.pids_max <= config.max_pids:
        raise ResourceLimitError(f"pids_max must be {MIN_PIDS}..{config.max_pids}, "
                                 f"got {spec.pids_max}")
    bad = [k for k, v in spec.env_vars.items() if not _ENV_KEY.match(k) or "\0" in v]
    if bad:
        raise SandboxSetupError(f"invalid environment variable names: {bad}")
    return Limits(spec.vcpus, spec.memory_mb, pids_for(spec.memory_mb, spec.pids_max),
                  limit_swap)
