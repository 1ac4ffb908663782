"""A sandbox's lifetime bounds (``Limits``) and the clock lifetimes are scheduled on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bac_server.app import team_timeouts
from bac_server.config import ConfigError
from bac_server.control import InvalidRequest, Limits, ManualClock


def test_no_end_is_allowed_without_a_cap_and_refused_with_one() -> None:
    assert Limits().lifetime(0) == 0
    assert Limits().lifetime(10 * 86_400) == 10 * 86_400  # past the old 24 h wall
    capped = Limits(max_timeout_s=3600)
    with pytest.raises(InvalidRequest, match="no end"):
        capped.lifetime(0)
    with pytest.raises(InvalidRequest, match="at most 3600"):
        capped.lifetime(3601)
    assert capped.timeout(0) == 0  # a timeout change to 0 still means "now"


def test_a_team_default_timeout_by_id_or_name() -> None:
    limits = Limits(team_default_timeouts=team_timeouts("agents=0, t-123=60"))
    assert limits.lifetime(None, default=limits.default_timeout("t-9", "agents")) == 0
    assert limits.default_timeout("t-123", "other") == 60
    assert limits.default_timeout("t-1", "other") == 300
    with pytest.raises(ConfigError, match="team=seconds"):
        team_timeouts("agents=forever")


def test_a_manual_clock_fires_what_falls_due_in_order_and_skips_the_cancelled() -> None:
    start = datetime(2030, 1, 1, tzinfo=UTC)
    clock = ManualClock(start)
    seen: list[tuple[str, datetime]] = []
    clock.call_at(start + timedelta(hours=2), lambda: seen.append(("b", clock.now())))
    clock.call_at(start + timedelta(hours=1), lambda: seen.append(("a", clock.now())))
    clock.call_at(start + timedelta(hours=1, minutes=30), lambda: seen.append(("x", clock.now()))
                  ).cancel()
    assert clock.advance(3600 * 48) == 2
    assert seen == [("a", start + timedelta(hours=1)), ("b", start + timedelta(hours=2))]
    assert clock.now() == start + timedelta(hours=48)
