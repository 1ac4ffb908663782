"""Fixtures of the SDK's and CLI's unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cli_stub import Stub, running_stub


@pytest.fixture
def stub() -> Iterator[Stub]:
    """A stub of the REST API on loopback (no sandboxes behind it)."""
    with running_stub() as served:
        yield served
