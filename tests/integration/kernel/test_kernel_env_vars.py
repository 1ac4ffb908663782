"""Env vars: sandbox-wide ones from a real envd, per-execution ones on top, reset after."""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from e2b_code_interpreter import Sandbox
from kernel_harness import Daemon, running_envd, running_kernel_server

_SANDBOX_VARS = {"BAC_WIDE": "sandbox-wide", "BAC_SHADOWED": "wide-value"}


@pytest.fixture(scope="module")
def envd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    logs = tmp_path_factory.mktemp("envd")
    with running_envd(logs / "envd.log", logs, _SANDBOX_VARS) as daemon:
        yield daemon


@pytest.fixture(scope="module")
def server_with_envd(envd: Daemon, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    home = tmp_path_factory.mktemp("home")
    with running_kernel_server(home, home / "server.log", envd_url=envd.url) as server:
        yield server


@pytest.fixture
def sbx(server_with_envd: Daemon) -> Sandbox:
    return Sandbox.create(debug=True, sandbox_url=server_with_envd.url)


def _env(sandbox: Sandbox, name: str, envs: dict[str, str] | None = None) -> str | None:
    code = f"import os; print(os.environ.get({name!r}, '<unset>'), end='')"
    execution = sandbox.run_code(code, envs=envs)
    assert execution.error is None, execution.error
    value = "".join(execution.logs.stdout)
    return None if value == "<unset>" else value


def test_sandbox_wide_vars_come_from_envd(sbx: Sandbox) -> None:
    """A context sees the env vars envd was initialised with."""
    assert _env(sbx, "BAC_WIDE") == "sandbox-wide"


def test_per_execution_vars_apply_once(sbx: Sandbox) -> None:
    """Per-execution vars are set for that cell only, and unset afterwards."""
    assert _env(sbx, "BAC_ONCE", envs={"BAC_ONCE": 'it\'s "quoted" $x'}) == 'it\'s "quoted" $x'
    assert _env(sbx, "BAC_ONCE") is None


def test_per_execution_var_restores_the_sandbox_value(sbx: Sandbox) -> None:
    """Overriding a sandbox-wide var lasts one cell; the wide value comes back."""
    assert _env(sbx, "BAC_SHADOWED", envs={"BAC_SHADOWED": "mine"}) == "mine"
    assert _env(sbx, "BAC_SHADOWED") == "wide-value"


def test_per_execution_vars_in_bash(sbx: Sandbox) -> None:
    """Bash contexts get per-execution vars too, reset afterwards."""
    first = sbx.run_code("echo $BAC_B", language="bash", envs={"BAC_B": "a b"})
    second = sbx.run_code('echo "[$BAC_B]" $BAC_WIDE', language="bash")
    assert first.logs.stdout == ["a b\n"]
    assert second.logs.stdout == ["[] sandbox-wide\n"]


def test_access_token_is_forwarded_to_envd(tmp_path: Path) -> None:
    """With a token-protected envd, the X-Access-Token of /execute is what unlocks /envs."""
    token = secrets.token_hex(8)
    with (
        running_envd(tmp_path / "envd.log", tmp_path, {"BAC_GUARDED": "yes"}, token) as envd,
        running_kernel_server(tmp_path, tmp_path / "server.log", envd_url=envd.url) as server,
    ):
        body = {"code": "import os; os.environ.get('BAC_GUARDED', 'absent')"}
        lines = []
        for headers in ({"X-Access-Token": "wrong"}, {"X-Access-Token": token}):
            response = httpx.post(f"{server.url}/contexts", json={}, timeout=60)
            body["context_id"] = response.json()["id"]
            with httpx.stream(
                "POST", f"{server.url}/execute", json=body, headers=headers, timeout=60
            ) as stream:
                lines.append([line for line in stream.iter_lines() if '"result"' in line])
        assert '"text":"absent"' in lines[0][0]
        assert '"text":"yes"' in lines[1][0]


def test_bad_env_var_name_is_rejected(sbx: Sandbox) -> None:
    """A name that is not an identifier is a 400, not code injected into the kernel."""
    from e2b import SandboxException

    with pytest.raises(SandboxException, match=r"400.*Invalid environment variable name"):
        sbx.run_code("1", envs={"A; rm -rf /": "x"})


@pytest.mark.parametrize(
    ("language", "program", "read"),
    [
        ("javascript", "tslab", "process.env.{name} ?? '<unset>'"),
        ("typescript", "tslab", "process.env.{name} ?? '<unset>'"),
        ("r", "R", "Sys.getenv('{name}', '<unset>')"),
        ("java", "jshell",
         'java.util.Objects.requireNonNullElse(System.getenv("{name}"), "<unset>")'),
    ],
)
def test_every_language_sees_sandbox_and_per_execution_vars(
    sbx: Sandbox, language: str, program: str, read: str
) -> None:
    """Sandbox-wide vars reach each language's kernel; per-execution ones last one cell."""
    if shutil.which(program) is None:
        pytest.skip(f"{program} is not installed on this machine")
    context = sbx.create_code_context(language=language)

    def value(name: str, envs: dict[str, str] | None = None) -> str | None:
        execution = sbx.run_code(read.format(name=name), context=context, envs=envs)
        assert execution.error is None, execution.error
        return execution.text

    wide = value("BAC_WIDE")
    once = value("BAC_ONCE", {"BAC_ONCE": "just this cell"})
    after = value("BAC_ONCE")
    assert [wide, once, after] == (
        ['[1] "sandbox-wide"', '[1] "just this cell"', '[1] "<unset>"']
        if language == "r" else ["sandbox-wide", "just this cell", "<unset>"]
    )
