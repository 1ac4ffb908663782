"""The kill switch's selector and the admin token's check at start-up: what a switch may
act on is decided before any sandbox is touched, and a weak token stops the server."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bac_server.config import ConfigError, ServerConfig
from bac_server.control import InvalidRequest, LiveSandbox, SandboxState, Selector


def _sandbox(team: str, template: str, alias: str | None = None,
             **metadata: str) -> LiveSandbox:
    now = datetime.now(UTC)
    return LiveSandbox(
        sandbox_id=f"{team}-{template}", team_id=team, template_id=template, alias=alias,
        cpu_count=1, memory_mb=256, disk_mb=1024, envd_access_token="t",
        traffic_access_token=None, metadata=metadata, env_vars={}, network=None,
        allow_internet_access=None, started_at=now, end_at=now, state=SandboxState.RUNNING)


def test_every_filter_given_must_match() -> None:
    box = _sandbox("alpha", "tpl123", alias="agent", run_id="r1", stage="2")
    assert Selector(everything=True).matches(box)
    assert Selector(team="alpha").matches(box)
    assert not Selector(team="beta").matches(box)
    assert Selector(template="tpl123").matches(box)
    assert Selector(template="agent").matches(box)  # by alias too
    assert not Selector(template="base").matches(box)
    assert Selector(metadata={"run_id": "r1"}).matches(box)
    assert Selector(metadata={"run_id": "r1", "stage": "2"}, team="alpha").matches(box)
    assert not Selector(metadata={"run_id": "r1", "stage": "3"}).matches(box)
    assert not Selector(metadata={"run_id": "r1"}, team="beta").matches(box)
    assert not Selector(metadata={"missing": ""}).matches(box)


@pytest.mark.parametrize("selector", [
    {}, {"everything": False}, {"metadata": {}},
    {"everything": True, "team": "alpha"}, {"everything": True, "metadata": {"a": "b"}},
    {"team": ""}, {"template": ""},
    {"metadata": {f"k{i}": "v" for i in range(65)}},
])
def test_a_selector_never_means_everything_by_omission(selector: dict[str, object]) -> None:
    with pytest.raises(InvalidRequest):
        Selector(**selector)  # type: ignore[arg-type]


@pytest.mark.parametrize("token", ["short", " " + "x" * 40, "x" * 40 + "\n", "x" * 31])
def test_a_weak_admin_token_stops_the_server(token: str) -> None:
    with pytest.raises(ConfigError, match="BAC_ADMIN_TOKEN"):
        ServerConfig.from_env({"BAC_ADMIN_TOKEN": token})


def test_no_admin_token_leaves_the_admin_routes_off_and_a_strong_one_is_taken() -> None:
    assert ServerConfig.from_env({}).admin_token == ""
    assert ServerConfig.from_env({"BAC_ADMIN_TOKEN": "a" * 32}).admin_token == "a" * 32
