"""envd's spawn, by each of its two paths (bac-spawn through vfork; fork with the steps in
Python where the helper is not built): a command's OOM score, identity, session and
terminal, envd's own score, and starts that fail."""

from __future__ import annotations

import os
import pwd
import select
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bac_envd import CHILD_OOM_SCORE_ADJ
from bac_envd._users import User, lookup_user
from bac_envd.process import _spawn
from bac_envd.process._env import DEFAULT_PATH, build_env
from bac_envd.process._spawn import Spawned, SpawnError, SpawnRequest, spawn

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]

SOURCE = Path(_spawn.__file__).with_name("spawn_helper.c")
# What the child reports: its score, ids, groups, session leader, controlling tty.
REPORT = (
    'read s < /proc/self/oom_score_adj; set -- $(ps -o sid=,tty= -p $$); '
    'echo "$s|$(id -u) $(id -g)|$(id -ru) $(id -rg)|$(id -G)|$(grep -E "^(Uid|Gid)" '
    '/proc/self/status | tr -s "\\t" " " | tr "\\n" ";")|$1 $$|$2"'
)


@pytest.fixture(scope="module")
def helper(tmp_path_factory: pytest.TempPathFactory) -> str:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build bac-spawn")
    binary = tmp_path_factory.mktemp("helper") / "bac-spawn"
    subprocess.run([compiler, "-static", "-O2", "-Wall", "-Werror", "-o", str(binary),
                    str(SOURCE)], check=True)
    return str(binary)


@pytest.fixture(params=["helper", "preexec"])
def path(request: pytest.FixtureRequest, helper: str) -> Iterator[str]:
    """Each test runs by both paths."""
    saved = _spawn.HELPER
    _spawn.HELPER = helper if request.param == "helper" else None
    yield request.param
    _spawn.HELPER = saved


def _user(name: str = "nobody") -> User:
    try:
        pwd.getpwnam(name)
    except KeyError:
        pytest.skip(f"no user {name}")
    return lookup_user(name)


def _request(argv: list[str], user: User, *, pty: bool = False,
             cwd: str = "/") -> SpawnRequest:
    return SpawnRequest(argv=argv, env=build_env(user, {}, {}, DEFAULT_PATH), cwd=cwd, user=user,
                        pty_size=(80, 24) if pty else None, stdin=False)


def _output(spawned: Spawned) -> str:
    fd = spawned.pty_fd if spawned.pty_fd is not None else spawned.stdout_fd
    assert fd is not None
    out = b""
    try:
        while True:
            select.select([fd], [], [], 10)
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            except OSError:  # EIO: the PTY's last holder is gone
                break
            if not chunk:
                break
            out += chunk
    finally:
        for other in (spawned.stdin_fd, spawned.stdout_fd, spawned.stderr_fd, spawned.pty_fd):
            if other is not None:
                os.close(other)
        spawned.popen.wait(10)
    return out.decode().strip()


def _own_score() -> str:
    return Path("/proc/self/oom_score_adj").read_text().strip()


@pytest.mark.parametrize("pty", [False, True], ids=["pipes", "pty"])
def test_the_child_is_the_oom_killers_first_choice_as_the_user(path: str, pty: bool) -> None:
    """Score 1000, the user's uid/gid in every slot and its groups, its own session (and
    for a PTY that terminal as its controlling one); envd's own score is unchanged."""
    user = _user()
    before = _own_score()
    report = _output(spawn(_request(["/bin/sh", "-c", REPORT], user, pty=pty)))
    score, ids, real, groups, status, session, tty = report.split("|")
    assert score == str(CHILD_OOM_SCORE_ADJ)
    assert ids == real == f"{user.uid} {user.gid}"
    assert sorted(int(g) for g in groups.split()) == sorted({user.gid, *user.groups})
    uid_line, gid_line = status.strip(";").split(";")
    assert uid_line.split()[1:] == [str(user.uid)] * 4
    assert gid_line.split()[1:] == [str(user.gid)] * 4
    leader, pid = session.split()
    assert leader == pid  # setsid: its own session
    assert (tty != "?") is pty
    assert _own_score() == before


def test_root_keeps_root_and_gets_the_score(path: str) -> None:
    user = lookup_user("root")
    report = _output(spawn(_request(["/bin/sh", "-c", REPORT], user)))
    score, ids = report.split("|")[:2]
    assert (score, ids) == (str(CHILD_OOM_SCORE_ADJ), "0 0")


def test_a_missing_binary_is_a_failed_start_with_the_same_message(path: str) -> None:
    user = _user()
    with pytest.raises(SpawnError) as bare:
        spawn(_request(["no-such-binary-anywhere"], user))
    assert str(bare.value) == ("error starting process 'no-such-binary-anywhere': "
                               "no-such-binary-anywhere: no such file or directory")
    with pytest.raises(SpawnError) as absolute:
        spawn(_request(["/no/such/bin", "x"], user))
    assert str(absolute.value) == ("error starting process '/no/such/bin x': "
                                   "/no/such/bin: no such file or directory")


def test_a_binary_the_user_may_not_run_is_a_failed_start(path: str, tmp_path: Path) -> None:
    """Permission is the user's: root could run it, the user cannot."""
    script = tmp_path / "only-root"
    script.write_text("#!/bin/sh\necho ran\n")
    script.chmod(0o700)
    tmp_path.chmod(0o755)
    with pytest.raises(SpawnError, match="only-root: permission denied"):
        spawn(_request([str(script)], _user()))


def test_bad_cwd_is_a_failed_start(path: str, tmp_path: Path) -> None:
    user = _user()
    with pytest.raises(SpawnError, match="cwd '/no/such/dir' does not exist"):
        spawn(_request(["true"], user, cwd="/no/such/dir"))
    (tmp_path / "file").write_text("")
    with pytest.raises(SpawnError, match="is not a directory"):
        spawn(_request(["true"], user, cwd=str(tmp_path / "file")))


@pytest.mark.parametrize("uid", [2**32 - 1, 0], ids=["uid-left-unchanged", "gid-left-unchanged"])
def test_a_credential_switch_that_does_not_take_runs_nothing(
    path: str, tmp_path: Path, uid: int
) -> None:
    """An id of -1 (2**32 - 1) asks setreuid/setregid to leave that id as it is: root's
    stays, the check finds it and the start fails with the hook's message; nothing ran."""
    marker = tmp_path / "ran"
    user = _user()
    broken = User(user.name, uid or user.uid, 2**32 - 1 if uid == 0 else user.gid,
                         user.home, user.groups)
    with pytest.raises(SpawnError, match="Exception occurred in preexec_fn"):
        spawn(_request(["/bin/sh", "-c", f"touch {marker}"], broken))
    assert not marker.exists()
