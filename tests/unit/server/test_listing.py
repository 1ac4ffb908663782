"""List filters, ordering and cursor pagination over live sandboxes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bac_server.control import Cursor, InvalidRequest, ListQuery, LiveSandbox, SandboxState, page

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _sbx(i: int, **changes: object) -> LiveSandbox:
    values: dict[str, object] = dict(
        sandbox_id=f"s{i:02d}", team_id="t", template_id="base", alias=None, cpu_count=1,
        memory_mb=512, disk_mb=1, envd_access_token="x", traffic_access_token=None,
        metadata={"n": str(i % 2)}, env_vars={}, network=None, allow_internet_access=None,
        started_at=T0 + timedelta(seconds=i), end_at=T0 + timedelta(hours=1),
        state=SandboxState.RUNNING,
    )
    values.update(changes)
    return LiveSandbox(**values)  # type: ignore[arg-type]


def _ids(items: list[LiveSandbox]) -> list[str]:
    return [s.sandbox_id for s in items]


def test_pages_walk_every_item_once_newest_first() -> None:
    """limit=2 pages cover all items exactly once, newest first, no token on the last."""
    sandboxes = [_sbx(i) for i in range(5)]
    seen: list[str] = []
    cursor = None
    while True:
        items, token = page(sandboxes, ListQuery(metadata={}, limit=2, cursor=cursor))
        seen += _ids(items)
        if token is None:
            break
        cursor = Cursor.decode(token)
    assert seen == ["s04", "s03", "s02", "s01", "s00"]


def test_exact_fit_has_no_next_token() -> None:
    """When the page holds the last item there is no X-Next-Token."""
    items, token = page([_sbx(0), _sbx(1)], ListQuery(metadata={}, limit=2))
    assert _ids(items) == ["s01", "s00"] and token is None


def test_ascending_order_and_cursor() -> None:
    """order=asc lists oldest first and pages forward."""
    sandboxes = [_sbx(i) for i in range(3)]
    first, token = page(sandboxes, ListQuery(metadata={}, newest_first=False, limit=2))
    assert _ids(first) == ["s00", "s01"] and token is not None
    rest, token = page(
        sandboxes, ListQuery(metadata={}, newest_first=False, limit=2, cursor=Cursor.decode(token))
    )
    assert _ids(rest) == ["s02"] and token is None


def test_filters_combine() -> None:
    """Metadata, state, template and startedAfter all must match."""
    sandboxes = [
        _sbx(0), _sbx(1), _sbx(2, state=SandboxState.PAUSED), _sbx(3, template_id="other"),
        _sbx(4, alias="py"),
    ]
    assert _ids(page(sandboxes, ListQuery(metadata={"n": "0"}))[0]) == ["s04", "s02", "s00"]
    paused = ListQuery(metadata={}, states=frozenset({SandboxState.PAUSED}))
    assert _ids(page(sandboxes, paused)[0]) == ["s02"]
    assert _ids(page(sandboxes, ListQuery(metadata={}, template="other"))[0]) == ["s03"]
    assert _ids(page(sandboxes, ListQuery(metadata={}, template="py"))[0]) == ["s04"]
    late = ListQuery(metadata={}, started_after=T0 + timedelta(seconds=3))
    assert _ids(page(sandboxes, late)[0]) == ["s04", "s03"]


@pytest.mark.parametrize("token", ["", "!!!", "bm90LWEtY3Vyc29y", "MTI6"])
def test_garbage_cursor_is_a_clear_error(token: str) -> None:
    """A token we did not issue is a 400-class error naming nextToken."""
    with pytest.raises(InvalidRequest, match="nextToken"):
        Cursor.decode(token)
