"""envd's pure logic without a daemon: user, path and env resolution, init state, Go-style
strings, content negotiation and URL signing (cross-checked with the e2b SDK's signer)."""

from __future__ import annotations

import base64
import pwd
import stat

import pytest
from e2b.sandbox.signature import get_signature

from bac_envd._errors import InitError, InvalidPath, UnknownUser
from bac_envd._paths import resolve_path
from bac_envd._state import EnvdState
from bac_envd._users import User, basic_auth_username, default_username, lookup_user, select_user
from bac_envd.filesystem import go_file_mode
from bac_envd.process import ExitInfo
from bac_envd.process._env import BadEnvironment, build_env
from bac_envd.transfer._encoding import EncodingError, request_encoding, response_encoding
from bac_protocol.signing import sign

ALICE = User(name="alice", uid=1000, gid=1000, home="/home/alice", groups=(1000, 27))


def basic(name: str) -> str:
    return "Basic " + base64.b64encode(f"{name}:".encode()).decode()


def test_basic_auth_header_names_the_user() -> None:
    """'Basic base64(user:)' yields the user; absent or other schemes yield None."""
    assert basic_auth_username(basic("bob")) == "bob"
    assert basic_auth_username(None) is None
    assert basic_auth_username("Bearer abc") is None
    with pytest.raises(UnknownUser):
        basic_auth_username("Basic !!!not-base64")


def test_lookup_user_reads_the_passwd_database() -> None:
    """root resolves to uid/gid 0 with its home and groups; unknown names are refused."""
    root = lookup_user("root")
    assert (root.uid, root.gid, root.home) == (0, 0, pwd.getpwnam("root").pw_dir)
    assert 0 in root.groups
    for bad in ("no-such-user-here", "", "ro\0ot"):
        with pytest.raises(UnknownUser):
            lookup_user(bad)


def test_user_selection_order() -> None:
    """Requested user > /init default > 'user' if the image has it > root."""
    assert select_user("root", "no-such-user-here").name == "root"
    assert default_username("alice") == "alice"
    try:
        pwd.getpwnam("user")
        expected = "user"
    except KeyError:
        expected = "root"
    assert default_username(None) == expected
    with pytest.raises(UnknownUser):
        select_user(None, "no-such-user-here")


@pytest.mark.parametrize(
    ("path", "workdir", "expected"),
    [
        ("", "/work", "/work"),
        ("", None, "/home/alice"),
        ("~", "/work", "/home/alice"),
        ("~/notes/x.txt", None, "/home/alice/notes/x.txt"),
        ("rel/../file", "/work", "/home/alice/file"),
        ("/abs//dir/../f", None, "/abs/f"),
        ("/", None, "/"),
    ],
)
def test_path_resolution(path: str, workdir: str | None, expected: str) -> None:
    """Paths resolve like E2B envd: workdir for empty, home for ~ and relative paths."""
    assert resolve_path(path, ALICE, workdir) == expected


@pytest.mark.parametrize("path", ["~bob/x", "a\0b"])
def test_unresolvable_paths_are_refused(path: str) -> None:
    """~otheruser and NUL bytes are clear errors."""
    with pytest.raises(InvalidPath):
        resolve_path(path, ALICE, None)


def test_environment_layering() -> None:
    """PATH + identity, then sandbox env, then request env; request values win."""
    env = build_env(ALICE, {"A": "sandbox", "B": "sandbox"}, {"B": "request"}, path="/bin")
    assert env == {
        "PATH": "/bin",
        "HOME": "/home/alice",
        "USER": "alice",
        "LOGNAME": "alice",
        "A": "sandbox",
        "B": "request",
    }
    for bad in ({"": "x"}, {"A=B": "x"}, {"A": "x\0y"}):
        with pytest.raises(BadEnvironment):
            build_env(ALICE, {}, bad, path="/bin")


def test_init_state_validates_then_applies() -> None:
    """/init bodies are validated as a whole; env vars merge, other fields replace."""
    state = EnvdState()
    state.apply_init({"envVars": {"A": "1"}, "defaultUser": "alice", "defaultWorkdir": "/w"})
    state.apply_init({"envVars": {"B": "2"}, "accessToken": "t"})
    assert state.env_vars == {"A": "1", "B": "2"}
    assert (state.default_user, state.default_workdir, state.access_token) == ("alice", "/w", "t")
    for bad in ([], {"envVars": {"A": 1}}, {"defaultWorkdir": "relative"}, {"accessToken": 5}):
        with pytest.raises(InitError):
            state.apply_init(bad)
    assert state.env_vars == {"A": "1", "B": "2"}
    assert (
        state.token_matches("t") and not state.token_matches("x") and not state.token_matches(None)
    )
    assert EnvdState().token_matches(None)


@pytest.mark.parametrize(
    ("mode", "text"),
    [
        (stat.S_IFREG | 0o644, "-rw-r--r--"),
        (stat.S_IFDIR | 0o755, "drwxr-xr-x"),
        (stat.S_IFLNK | 0o777, "Lrwxrwxrwx"),
        (stat.S_IFREG | 0o4755, "urwxr-xr-x"),
        (stat.S_IFDIR | 0o1777, "dtrwxrwxrwx"),
        (stat.S_IFCHR | 0o666, "Dcrw-rw-rw-"),
        (stat.S_IFBLK | 0o660, "Drw-rw----"),
        (stat.S_IFIFO | 0o644, "prw-r--r--"),
        (stat.S_IFSOCK | 0o755, "Srwxr-xr-x"),
        (stat.S_IFREG | 0o2750, "grwxr-x---"),
    ],
)
def test_go_file_mode_strings(mode: int, text: str) -> None:
    """Permissions strings match Go's os.FileMode.String()."""
    assert go_file_mode(mode) == text


def test_exit_info_matches_go_process_state() -> None:
    """Wait statuses map to Go's exit code, exited flag and status/error wording."""
    assert ExitInfo.from_wait_status(0) == ExitInfo(0, True, "exit status 0", None)
    assert ExitInfo.from_wait_status(3 << 8) == ExitInfo(3, True, "exit status 3", "exit status 3")
    assert ExitInfo.from_wait_status(9) == ExitInfo(-1, False, "signal: killed", "signal: killed")
    core = 11 | 0x80
    assert ExitInfo.from_wait_status(core).status == "signal: segmentation fault (core dumped)"


def test_content_negotiation() -> None:
    """gzip when accepted (by quality), identity otherwise; identity;q=0 alone is refused."""
    assert response_encoding(None) == ""
    assert response_encoding("gzip, deflate") == "gzip"
    assert response_encoding("gzip;q=0.1, identity") == ""
    assert response_encoding("br") == ""
    assert response_encoding("*;q=1, identity;q=0") == "gzip"
    with pytest.raises(EncodingError):
        response_encoding("br, identity;q=0")
    assert request_encoding("GZIP") == "gzip" and request_encoding(None) == ""
    with pytest.raises(EncodingError):
        request_encoding("zstd")


@pytest.mark.parametrize("user", [None, "alice"])
@pytest.mark.parametrize("expires", [None, 300])
def test_signature_matches_the_e2b_sdk(user: str | None, expires: int | None) -> None:
    """envd's v1 signature equals the one the official SDK puts into signed URLs."""
    theirs = get_signature("/home/user/a b.txt", "read", user, "tok", expires)
    ours = sign("/home/user/a b.txt", "read", user or "", "tok", theirs["expiration"])
    assert ours == theirs["signature"]
