"""The check a restore passes before a restored sandbox runs on (``_confinement.check``),
against a real sandbox's init: it holds for the record of that very process, and fails
closed for a record that differs in any field or lacks one."""

from __future__ import annotations

from pathlib import Path

import pytest
from backend_harness import SandboxFactory, slot_record

from bac_server.backends.base import CheckpointFailed
from bac_server.backends.namespaces import NamespaceBackend
from bac_server.backends.namespaces.checkpoint.criu import _confinement

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]


async def _init(backend: NamespaceBackend, make_sandbox: SandboxFactory) -> tuple[int, Path]:
    sbx = await make_sandbox()
    pid = slot_record(backend, sbx.id).init_pid
    assert pid is not None
    return pid, Path(f"/proc/{pid}/ns/net")


async def test_the_record_of_the_process_itself_passes(
        backend: NamespaceBackend, make_sandbox: SandboxFactory) -> None:
    pid, netns = await _init(backend, make_sandbox)
    saved = _confinement.observe(pid)
    assert set(saved) == set(_confinement.FIELDS)
    _confinement.check(pid, saved, netns)


@pytest.mark.parametrize("field", _confinement.FIELDS)
async def test_a_record_missing_a_field_is_refused(
        backend: NamespaceBackend, make_sandbox: SandboxFactory, field: str) -> None:
    pid, netns = await _init(backend, make_sandbox)
    saved = _confinement.observe(pid)
    del saved[field]
    with pytest.raises(CheckpointFailed, match=f"lacks \\['{field}'\\]"):
        _confinement.check(pid, saved, netns)


async def test_an_empty_record_is_refused(
        backend: NamespaceBackend, make_sandbox: SandboxFactory) -> None:
    pid, netns = await _init(backend, make_sandbox)
    with pytest.raises(CheckpointFailed, match="lacks"):
        _confinement.check(pid, {}, netns)


async def test_a_record_that_differs_is_refused(
        backend: NamespaceBackend, make_sandbox: SandboxFactory) -> None:
    pid, netns = await _init(backend, make_sandbox)
    saved = _confinement.observe(pid) | {"NoNewPrivs": "1" if _confinement.observe(pid)[
        "NoNewPrivs"] == "0" else "0"}
    with pytest.raises(CheckpointFailed, match="confined differently"):
        _confinement.check(pid, saved, netns)
