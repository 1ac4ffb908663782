"""The sandbox lifecycle transition table."""

from __future__ import annotations

import pytest

from bac_server.control.sandboxes import (
    LIVE_STATES,
    InvalidTransition,
    SandboxState,
    can_transition,
    check_transition,
)

S = SandboxState


def test_final_states_have_no_way_out() -> None:
    """Killed, died and failed sandboxes never come back."""
    for final in (S.KILLED, S.DIED, S.FAILED):
        assert not any(can_transition(final, target) for target in S)
        assert final not in LIVE_STATES


def test_allowed_and_forbidden_steps() -> None:
    """Creating only becomes running or failed; running can pause, end or die."""
    assert can_transition(S.CREATING, S.RUNNING)
    assert can_transition(S.CREATING, S.FAILED)
    assert not can_transition(S.CREATING, S.PAUSED)
    assert can_transition(S.RUNNING, S.KILLED)
    assert can_transition(S.PAUSED, S.RUNNING)
    with pytest.raises(InvalidTransition, match="killed to running"):
        check_transition(S.KILLED, S.RUNNING)
