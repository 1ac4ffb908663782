"""Contexts: one kernel each, per language and cwd; list, restart, remove."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import needs
from e2b import NotFoundException, SandboxException
from e2b_code_interpreter import AsyncSandbox, Sandbox
from kernel_harness import Daemon, running_kernel_server


def test_contexts_are_isolated_and_keep_their_cwd(sandbox: Sandbox, tmp_path: Path) -> None:
    """Two Python contexts have separate state; each runs in the cwd it was created with."""
    first = sandbox.create_code_context(cwd=str(tmp_path))
    second = sandbox.create_code_context()
    assert (first.language, first.cwd) == ("python", str(tmp_path))
    sandbox.run_code("secret = 1", context=first)
    assert sandbox.run_code("import os; os.getcwd()", context=first).text == str(tmp_path)
    missing = sandbox.run_code("secret", context=second)
    assert missing.error is not None and missing.error.name == "NameError"
    assert sandbox.run_code("secret", context=first).text == "1"


def test_list_contains_created_contexts(sandbox: Sandbox) -> None:
    """Listing shows every context with its id, language and cwd; removed ones vanish."""
    context = sandbox.create_code_context()
    listed = {c.id: (c.language, c.cwd) for c in sandbox.list_code_contexts()}
    assert listed[context.id] == ("python", context.cwd)
    sandbox.remove_code_context(context)
    assert context.id not in {c.id for c in sandbox.list_code_contexts()}


def test_default_python_context_is_listed(sandbox: Sandbox) -> None:
    """The Python context started with the server appears in the list."""
    sandbox.run_code("1")
    assert "python" in {c.language for c in sandbox.list_code_contexts()}


def test_restart_loses_state(sandbox: Sandbox) -> None:
    """After a restart the context id still works, but its variables are gone."""
    context = sandbox.create_code_context()
    sandbox.run_code("kept = 5", context=context)
    sandbox.restart_code_context(context)
    execution = sandbox.run_code("kept", context=context)
    assert execution.error is not None and execution.error.name == "NameError"
    assert sandbox.run_code("2 + 2", context=context).text == "4"


def test_removed_context_is_not_found(sandbox: Sandbox) -> None:
    """Running in, restarting or removing a removed context is a 404."""
    context = sandbox.create_code_context()
    sandbox.remove_code_context(context.id)
    with pytest.raises(NotFoundException):
        sandbox.run_code("1", context=context)
    with pytest.raises(NotFoundException):
        sandbox.restart_code_context(context)
    with pytest.raises(NotFoundException):
        sandbox.remove_code_context(context)


def test_bash_context(sandbox: Sandbox, tmp_path: Path) -> None:
    """Bash keeps shell state between cells and runs in its cwd."""
    context = sandbox.create_code_context(language="bash", cwd=str(tmp_path))
    assert context.language == "bash"
    sandbox.run_code("GREETING=hi", context=context)
    execution = sandbox.run_code('echo "$GREETING from $PWD"', context=context)
    assert execution.logs.stdout == [f"hi from {tmp_path}\n"]


def test_bash_by_language_uses_one_default_context(sandbox: Sandbox) -> None:
    """`language='bash'` without a context reuses the same default Bash context."""
    sandbox.run_code("export FROM_FIRST=1", language="bash")
    execution = sandbox.run_code("echo $FROM_FIRST", language="bash")
    assert execution.logs.stdout == ["1\n"]
    assert [c.language for c in sandbox.list_code_contexts()].count("bash") >= 1


@needs("tslab")
def test_javascript_top_level_await(sandbox: Sandbox, tmp_path: Path) -> None:
    """JavaScript (tslab) keeps state, supports top-level await and runs in its cwd."""
    context = sandbox.create_code_context(language="js", cwd=str(tmp_path))
    assert context.language == "javascript"
    sandbox.run_code("const base = await Promise.resolve(40)", context=context)
    execution = sandbox.run_code("console.log(base + 2, process.cwd())", context=context)
    assert execution.error is None, execution.error
    assert execution.logs.stdout == [f"42 {tmp_path}\n"]


@needs("tslab")
def test_javascript_error(sandbox: Sandbox) -> None:
    """A thrown JavaScript error becomes an error with its name and message."""
    execution = sandbox.run_code("throw new TypeError('nope')", language="javascript")
    assert execution.error is not None
    assert (execution.error.name, execution.error.value) == ("TypeError", "nope")


@needs("tslab")
def test_typescript(sandbox: Sandbox) -> None:
    """TypeScript type-checks and runs, with top-level await."""
    context = sandbox.create_code_context(language="ts")
    assert context.language == "typescript"
    code = "const n: number = await Promise.resolve(6);\nconsole.log(n * 7)"
    execution = sandbox.run_code(code, context=context)
    assert execution.error is None, execution.error
    assert execution.logs.stdout == ["42\n"]
    wrong = sandbox.run_code("const s: string = 5", context=context)
    assert wrong.error is not None


@needs("R")
def test_r_context(sandbox: Sandbox, tmp_path: Path) -> None:
    """R (IRkernel) keeps state and runs in its cwd."""
    context = sandbox.create_code_context(language="r", cwd=str(tmp_path))
    sandbox.run_code("x <- 21", context=context)
    execution = sandbox.run_code("cat(x * 2, getwd())", context=context)
    assert execution.error is None, execution.error
    assert execution.logs.stdout == [f"42 {tmp_path}"]
    failed = sandbox.run_code("stop('boom')", context=context)
    assert failed.error is not None and "boom" in failed.error.value


def test_default_contexts_are_listed_before_any_call(tmp_path: Path) -> None:
    """A fresh server lists its Python and JavaScript default contexts before any cell ran,
    and running code by language uses exactly those contexts."""
    with running_kernel_server(tmp_path, tmp_path / "server.log", prestart="") as server:
        sandbox = Sandbox.create(debug=True, sandbox_url=server.url)
        listed = {c.language: c for c in sandbox.list_code_contexts()}
        expected = {"python", "javascript"} if shutil.which("tslab") else {"python"}
        assert set(listed) == expected
        assert {c.cwd for c in listed.values()} == {str(tmp_path)}
        sandbox.run_code("shared = 5", context=listed["python"])
        assert sandbox.run_code("shared").text == "5"
        sandbox.restart_code_context(listed["python"])
        assert sandbox.run_code("'shared' in globals()").text == "False"
        if "javascript" in listed:
            sandbox.run_code("var fromListed = 6", context=listed["javascript"])
            assert sandbox.run_code("fromListed", language="js").text == "6"
        assert {c.id for c in sandbox.list_code_contexts()} == {c.id for c in listed.values()}


def test_context_cwd_can_be_any_directory_root_can_enter(sandbox: Sandbox) -> None:
    """Kernels run as the server's user (root in a sandbox, as in E2B's): `/root` and other
    directories outside the home work as a context's cwd, for every language."""
    assert os.geteuid() == 0, "the kernel tests run as root, as the sandbox's server does"
    context = sandbox.create_code_context(cwd="/root")
    assert context.cwd == "/root"
    assert sandbox.run_code("import os; os.getcwd()", context=context).text == "/root"
    bash = sandbox.create_code_context(language="bash", cwd="/root")
    assert sandbox.run_code("pwd", context=bash).logs.stdout == ["/root\n"]


def test_context_cwd_that_does_not_exist_is_a_400(sandbox: Sandbox) -> None:
    """A cwd that is no directory is the caller's mistake (400 with the reason)."""
    with pytest.raises(SandboxException, match=r"400.*not an existing directory"):
        sandbox.create_code_context(cwd="/no/such/place")


async def test_async_sdk_contexts(kernel_server: Daemon) -> None:
    """The async SDK lists the defaults, creates a context in /root, restarts and removes
    it; a removed default context is made again on the next cell of its language."""
    sandbox = await AsyncSandbox.create(debug=True, sandbox_url=kernel_server.url)
    listed = {c.language: c for c in await sandbox.list_code_contexts()}
    assert "python" in listed
    context = await sandbox.create_code_context(cwd="/root")
    assert (await sandbox.run_code("import os; os.getcwd()", context=context)).text == "/root"
    await sandbox.run_code("gone = 1", context=context)
    await sandbox.restart_code_context(context)
    after = await sandbox.run_code("'gone' in globals()", context=context)
    assert after.text == "False"
    await sandbox.remove_code_context(context)
    await sandbox.remove_code_context(listed["python"])
    assert (await sandbox.run_code("2 + 2")).text == "4"
    ids = {c.id for c in await sandbox.list_code_contexts()}
    assert context.id not in ids and listed["python"].id not in ids
    assert "python" in {c.language for c in await sandbox.list_code_contexts()}
