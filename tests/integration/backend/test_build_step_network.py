"""A build step's network: the internet by default, its policy applied (the host being
unreachable is proved in tests/security/test_build_step_escape.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_build_step_support import fake_target, probe

from bac_server.backends.base import TemplateImage
from bac_server.backends.egress import EgressPolicy
from bac_server.backends.namespaces import NamespaceBackend

pytestmark = [pytest.mark.root, pytest.mark.asyncio(loop_scope="session")]


@pytest.fixture(scope="module")
def target() -> Iterator[str]:
    with fake_target() as address:
        yield address


async def test_step_reaches_the_internet_by_default(backend: NamespaceBackend,
                                                    template: TemplateImage,
                                                    target: str) -> None:
    """With the default policy a step connects to a public address."""
    found = await probe(backend, (template.rootfs,), f"{target}:80", f"{target}:8080")
    assert found == {f"{target}:80": "ok", f"{target}:8080": "ok"}


async def test_step_policy_is_enforced(backend: NamespaceBackend, template: TemplateImage,
                                       target: str) -> None:
    """``step.network`` applies: internet off reaches nothing."""
    found = await probe(backend, (template.rootfs,), f"{target}:80",
                        network=EgressPolicy(internet=False))
    assert found[f"{target}:80"] != "ok"
