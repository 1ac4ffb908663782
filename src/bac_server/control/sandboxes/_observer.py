"""What the sandboxes' lifecycle reports as it happens, for whoever measures it (the
Prometheus metrics, ``control.telemetry``, implement it)."""

from __future__ import annotations

from typing import Protocol


class LifecycleObserver(Protocol):
    def created(self, path: str, template: str, seconds: float) -> None: ...

    def create_failed(self, template: str) -> None: ...

    def paused(self, kind: str, seconds: float) -> None: ...

    def resumed(self, kind: str, seconds: float) -> None: ...
