"""One layer of a build: found in the cache, or made by a command in a build sandbox.

``StepRunner.layer`` looks the key up, and on a miss takes the key's lock, looks again
(another build may have made it meanwhile), runs the step into a private directory and
publishes it. A failed or cancelled step leaves neither a layer nor its directory.
``StepRunner.command`` runs one ``BuildStep``: output lines go to the build log as they
come (facts are kept apart), a non-zero exit raises ``StepFailed`` with the exit code (one
line: the output is in the log already, under the same step), and a full disk is named as
such. Messages name what ran (``RUN``, ``COPY src dest``...), not the step's number: the
log entry's ``step`` says which step it is, in the numbering of the steps as sent, which
a client may show differently (the Bac SDK shows the instructions the user wrote).
"""

from __future__ import annotations

import asyncio
import collections
import errno
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from bac_server.backends.base import BackendError, Builder, BuildStep
from bac_server.cancel_safe import off_loop

from .._errors import DiskFullError, StepFailed, TemplateBuildError
from .._steps import LogEntry, LogLevel
from ..layers import LayerInfo, LayerStore, LayerWork
from ._finalize import split_facts

LogCallback = Callable[[LogEntry], None]
TAIL_LINES = 20  # the last output lines looked at to blame a failure on a full disk
HOST_CA_MOUNT = "/.bac-host-ca"
# Where common tools look for a CA bundle named by the environment (OpenSSL/Python,
# requests, pip, curl, git, node).
_CA_VARIABLES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE",
                 "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS")
_LOW_SPACE = 64 << 20  # below this much free space a failed step is blamed on the disk


@dataclass
class StepRunner:
    builder: Builder
    layers: LayerStore
    log: LogCallback
    vcpus: int
    memory_mb: int
    # The host's CA store (a directory holding ca-certificates.crt), bound into RUN steps
    # and named by the usual variables: downloads during a build trust what the host
    # trusts (a TLS-inspecting proxy's CA included), and the template keeps its own store.
    host_ca: Path | None = None

    def say(self, step: str, message: str, level: LogLevel = LogLevel.INFO) -> None:
        self.log(LogEntry(timestamp=time.time(), level=level, message=message, step=step))

    async def layer(self, key: str, label: str,
                    make: Callable[[LayerWork], Awaitable[dict[str, str]]]
                    ) -> tuple[LayerInfo, bool]:
        """The layer ``key`` and whether it came from the cache; ``make`` builds it into
        the work directory and returns its facts."""
        found = self.layers.get(key)
        if found is not None:
            return found, True
        async with self.layers.lock(key):
            found = self.layers.get(key)
            if found is not None:
                return found, True
            work = await asyncio.to_thread(self.layers.new_work, key)
            try:
                facts = await make(work)
                return await asyncio.to_thread(self._publish, work, label, facts), False
            except BaseException:
                await off_loop(lambda: self.layers.discard(work))
                raise

    def _publish(self, work: LayerWork, label: str, facts: dict[str, str]) -> LayerInfo:
        try:
            return self.layers.publish(work, label, facts)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise DiskFullError(f"{label}: no space left on the device holding "
                                    f"{self.layers.root} while saving the layer") from exc
            raise

    async def command(self, step_no: str, what: str, lowers: tuple[Path, ...], upper: Path,
                      argv: tuple[str, ...], *, env: tuple[tuple[str, str], ...] = (),
                      user: str = "root", cwd: str = "/",
                      binds: tuple[tuple[Path, str], ...] = (),
                      network: bool = False, says_why: bool = False) -> dict[str, str]:
        """Run one command of step ``step_no`` (``what``, e.g. ``RUN``, names it in errors);
        its facts. ``network``: the command downloads (RUN), so it gets the host's CA store.
        ``says_why``: Bac's own script, whose last line (``bac: ...``) says why it failed:
        that line is the error's reason."""
        tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        facts: dict[str, str] = {}

        def output(stream: str, line: str) -> None:
            if split_facts(line, facts):
                return
            tail.append(line)
            self.say(step_no, line)

        if network and self.host_ca is not None:
            bundle = f"{HOST_CA_MOUNT}/ca-certificates.crt"
            # The recipe's own values come later and win.
            env = (*((name, bundle) for name in _CA_VARIABLES), *env)
            binds = ((self.host_ca, HOST_CA_MOUNT), *binds)
        step = BuildStep(lowers=lowers, upper=upper, argv=argv, env=env, user=user, cwd=cwd,
                         binds=binds, vcpus=self.vcpus, memory_mb=self.memory_mb)
        try:
            code = await self.builder.run_build_step(step, output)
        except BackendError as exc:
            raise TemplateBuildError(f"{what}: could not run: {exc}") from exc
        if code != 0:
            if _disk_full(self.layers.root, tail):
                raise DiskFullError(f"{what}: no space left on the device holding "
                                    f"{self.layers.root} (exit code {code}); free some space "
                                    "and build again")
            how = f"was killed by signal {-code}" if code < 0 else f"failed with exit code {code}"
            why = tail[-1].removeprefix("bac: ") if says_why and tail else ""
            raise StepFailed(f"{what} {how}" + (f": {why}" if why else ""))
        return facts


def _disk_full(root: Path, tail: collections.deque[str]) -> bool:
    if any("No space left on device" in line for line in tail):
        return True
    try:
        info = os.statvfs(root)
    except OSError:
        return False
    return info.f_bavail * info.f_frsize < _LOW_SPACE
