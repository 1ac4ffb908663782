"""Acting as another sandbox user: commands run with that user's uid/gid/groups and
files are created owned by them (uses Debian's 'nobody', present on every host)."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest
from e2b import AuthenticationException, Sandbox

pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]
NOBODY = pwd.getpwnam("nobody")


@pytest.fixture
def shared_dir(workdir: Path) -> Path:
    os.chmod(workdir, 0o777)  # nobody must be able to use it as cwd and write into it
    return workdir


def test_command_runs_with_the_selected_users_identity(sandbox: Sandbox, shared_dir: Path) -> None:
    """user='nobody' runs the command with nobody's uid, gid, groups, USER and HOME."""
    result = sandbox.commands.run(
        'id -u; id -g; id -G; echo "$USER $LOGNAME $HOME"', user="nobody", cwd=str(shared_dir)
    )
    uid, gid, groups, identity = result.stdout.splitlines()
    assert (int(uid), int(gid)) == (NOBODY.pw_uid, NOBODY.pw_gid)
    assert set(map(int, groups.split())) == set(os.getgrouplist("nobody", NOBODY.pw_gid))
    assert identity == f"nobody nobody {NOBODY.pw_dir}"


def test_files_are_owned_by_the_acting_user(sandbox: Sandbox, shared_dir: Path) -> None:
    """Uploads and new directories made as nobody (incl. parents) belong to nobody."""
    sandbox.files.write(str(shared_dir / "made" / "by.txt"), "x", user="nobody")
    sandbox.files.make_dir(str(shared_dir / "dir" / "sub"), user="nobody")
    for rel in ("made", "made/by.txt", "dir", "dir/sub"):
        st = (shared_dir / rel).stat()
        assert (st.st_uid, st.st_gid) == (NOBODY.pw_uid, NOBODY.pw_gid), rel
    info = sandbox.files.get_info(str(shared_dir / "made" / "by.txt"))
    assert info.owner == "nobody"


def test_unknown_user_is_refused(sandbox: Sandbox) -> None:
    """A user the sandbox does not have is an authentication error, for RPCs and files."""
    with pytest.raises(AuthenticationException):
        sandbox.commands.run("true", user="no-such-user")
    with pytest.raises(AuthenticationException):
        sandbox.files.read("/etc/hostname", user="no-such-user")
