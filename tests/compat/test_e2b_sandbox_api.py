"""Control-plane calls of the official e2b SDK against Bac: create, info, list, timeouts,
connect, kill, metrics, and tenancy."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import pytest
from bac_process import ServerProcess
from e2b import Sandbox, SandboxQuery, SandboxState
from e2b.exceptions import AuthenticationException, NotFoundException, SandboxException

DEADLINE = 30.0


def _wait_for(check, what: str, deadline: float = DEADLINE):  # type: ignore[no-untyped-def]
    # The effect (a timer firing, a sample stored) has no event the client can wait on;
    # poll the API with a deadline.
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        result = check()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_create_returns_a_usable_secured_sandbox() -> None:
    """create gives an id, an envd token and envd 0.6.13; envVars reach every process."""
    sbx = Sandbox.create(envs={"GREETING": "hej"}, metadata={"suite": "compat"})
    try:
        assert sbx.sandbox_id.isalnum() and sbx.sandbox_id.islower()
        assert sbx._envd_access_token is not None
        assert sbx.commands.run("echo $GREETING").stdout == "hej\n"
        info = sbx.get_info()
        assert info.template_id == "base"
        assert info.metadata == {"suite": "compat"}
        assert info.state == SandboxState.RUNNING
        assert info.envd_version == "0.6.13"
        assert (info.cpu_count, info.memory_mb) == (2, 512)
        assert info.started_at < info.end_at
    finally:
        sbx.kill()


def test_default_timeout_is_300_seconds() -> None:
    """Without a timeout the sandbox lives 300 s."""
    sbx = Sandbox.create()
    try:
        info = sbx.get_info()
        assert abs((info.end_at - info.started_at).total_seconds() - 300) < 5
    finally:
        sbx.kill()


def test_unknown_template_is_not_found() -> None:
    """A template that does not exist fails create with a 404-class error naming it."""
    with pytest.raises(SandboxException, match="nosuchtemplate"):
        Sandbox.create("nosuchtemplate")


def test_kill_and_is_running() -> None:
    """kill ends the sandbox: is_running turns False, get_info and kill then say not found."""
    sbx = Sandbox.create()
    assert sbx.is_running()
    assert sbx.kill() is True
    assert sbx.is_running() is False
    with pytest.raises(NotFoundException):
        sbx.get_info()
    assert Sandbox.kill(sbx.sandbox_id) is False


def test_set_timeout_kills_at_the_end() -> None:
    """set_timeout(1) ends the sandbox about a second later."""
    sbx = Sandbox.create()
    sbx.set_timeout(1)
    _wait_for(lambda: not sbx.is_running(), "the timeout to kill the sandbox")
    with pytest.raises(NotFoundException):
        Sandbox.get_info(sbx.sandbox_id)


def test_set_timeout_zero_ends_now() -> None:
    """set_timeout(0) expires the sandbox at once."""
    sbx = Sandbox.create()
    sbx.set_timeout(0)
    _wait_for(lambda: not sbx.is_running(), "an immediate expiry")


def test_connect_never_shortens_the_timeout() -> None:
    """connect(timeout=10) with 300 s left keeps the later end; a longer timeout extends it."""
    sbx = Sandbox.create(timeout=300)
    try:
        before = sbx.get_info().end_at
        again = Sandbox.connect(sbx.sandbox_id, timeout=10)
        assert again.get_info().end_at >= before
        assert again.commands.run("echo ok").stdout == "ok\n"
        sbx.connect(timeout=600)
        assert (sbx.get_info().end_at - before).total_seconds() > 250
    finally:
        sbx.kill()


def test_connect_to_a_killed_sandbox_is_not_found() -> None:
    """Connecting to an ended sandbox raises the SDK's not-found error."""
    sbx = Sandbox.create()
    sbx.kill()
    with pytest.raises(NotFoundException):
        Sandbox.connect(sbx.sandbox_id)


def test_list_filters_by_metadata_and_state() -> None:
    """list() finds sandboxes by metadata (values with spaces and '&'), and by state."""
    tag = uuid.uuid4().hex
    a = Sandbox.create(metadata={"run": tag, "name": "a b&c"})
    b = Sandbox.create(metadata={"run": tag, "name": "other"})
    try:
        found = Sandbox.list(query=SandboxQuery(metadata={"run": tag, "name": "a b&c"}))
        assert [s.sandbox_id for s in found.next_items()] == [a.sandbox_id]
        running = Sandbox.list(
            query=SandboxQuery(metadata={"run": tag}, state=[SandboxState.RUNNING])
        ).next_items()
        assert {s.sandbox_id for s in running} == {a.sandbox_id, b.sandbox_id}
        paused = Sandbox.list(
            query=SandboxQuery(metadata={"run": tag}, state=[SandboxState.PAUSED])
        ).next_items()
        assert paused == []
    finally:
        a.kill()
        b.kill()


def test_list_paginates_newest_first() -> None:
    """limit=1 pages one sandbox at a time, newest first, with has_next until the end."""
    tag = uuid.uuid4().hex
    made = [Sandbox.create(metadata={"page": tag}) for _ in range(3)]
    try:
        pager = Sandbox.list(query=SandboxQuery(metadata={"page": tag}), limit=1)
        seen = []
        while pager.has_next:
            items = pager.next_items()
            assert len(items) == 1
            seen.append(items[0].sandbox_id)
        assert seen == [s.sandbox_id for s in reversed(made)]
        assert pager.next_token is None
    finally:
        for sbx in made:
            sbx.kill()


def test_list_started_after_and_template() -> None:
    """startedAfter and template filters narrow the listing."""
    tag = uuid.uuid4().hex
    early = Sandbox.create(metadata={"t": tag})
    cut = datetime.now(UTC)
    late = Sandbox.create(metadata={"t": tag})
    try:
        query = SandboxQuery(metadata={"t": tag}, started_after=cut)
        assert [s.sandbox_id for s in Sandbox.list(query=query).next_items()] == [late.sandbox_id]
        by_template = SandboxQuery(metadata={"t": tag}, template="base")
        assert len(Sandbox.list(query=by_template).next_items()) == 2
    finally:
        early.kill()
        late.kill()


def test_metrics_are_sampled() -> None:
    """get_metrics returns stored samples with every field, within the asked range."""
    sbx = Sandbox.create()
    try:
        metrics = _wait_for(lambda: sbx.get_metrics(), "a metrics sample")
        sample = metrics[0]
        assert sample.cpu_count == 2
        assert sample.mem_total == 512 * 1024 * 1024
        assert 0 < sample.mem_used <= sample.mem_total
        assert sample.disk_total > 0
        future = datetime.fromtimestamp(time.time() + 3600, UTC)
        assert sbx.get_metrics(start=future) == []
    finally:
        sbx.kill()


def test_other_team_cannot_see_or_touch(server: ServerProcess) -> None:
    """Another team's key gets not-found for get, kill, timeout and connect, and lists nothing."""
    sbx = Sandbox.create()
    other = {"api_key": server.keys[1]}
    try:
        with pytest.raises(NotFoundException):
            Sandbox.get_info(sbx.sandbox_id, **other)
        assert Sandbox.kill(sbx.sandbox_id, **other) is False
        with pytest.raises(NotFoundException):
            Sandbox.set_timeout(sbx.sandbox_id, 5, **other)
        with pytest.raises(NotFoundException):
            Sandbox.connect(sbx.sandbox_id, **other)
        listed = Sandbox.list(**other).next_items()
        assert sbx.sandbox_id not in {s.sandbox_id for s in listed}
        assert sbx.is_running()
    finally:
        sbx.kill()


def test_bad_key_is_authentication_error() -> None:
    """A wrong API key fails with the SDK's AuthenticationException."""
    with pytest.raises(AuthenticationException):
        Sandbox.create(api_key="e2b_" + "0" * 40)


def test_pause_and_connect_resumes() -> None:
    """pause stops the sandbox (is_running False, a second pause returns False); connect
    resumes it with files and processes intact."""
    sbx = Sandbox.create(timeout=120)
    try:
        sbx.files.write("/home/user/state.txt", "before pause")
        background = sbx.commands.run("sleep 300", background=True)
        sbx.pause()
        assert sbx.is_running() is False
        assert Sandbox.get_info(sbx.sandbox_id).state == SandboxState.PAUSED
        assert Sandbox.pause(sbx.sandbox_id) is False
        resumed = Sandbox.connect(sbx.sandbox_id)
        assert resumed.files.read("/home/user/state.txt") == "before pause"
        assert background.pid in {p.pid for p in resumed.commands.list()}
        assert sbx.get_info().state == SandboxState.RUNNING
    finally:
        sbx.kill()
