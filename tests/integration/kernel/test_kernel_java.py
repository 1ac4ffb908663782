"""Java (Bac's kernel around the JDK's JShell): values, output, errors, env vars, state
kept across cells and across an interrupt (sync and async SDK)."""

from __future__ import annotations

import pytest
from conftest import needs
from e2b_code_interpreter import AsyncSandbox, Sandbox
from kernel_harness import Daemon

pytestmark = needs("jshell")


@pytest.fixture(scope="module")
def java(kernel_server: Daemon) -> object:
    """One Java context for the module (a JVM takes a couple of seconds to start)."""
    sandbox = Sandbox.create(debug=True, sandbox_url=kernel_server.url)
    return sandbox.create_code_context(language="java")


def test_last_expression_is_the_text_result(sandbox: Sandbox, java: object) -> None:
    """A cell's last expression is `execution.text`; printed lines are stdout, in order."""
    execution = sandbox.run_code(
        'int base = 40;\nSystem.out.println("one");\nSystem.err.println("two");\nbase + 2',
        context=java,
    )
    assert execution.error is None, execution.error
    assert execution.text == "42"
    assert execution.logs.stdout == ["one\n"] and execution.logs.stderr == ["two\n"]
    assert sandbox.run_code('"str" + base', context=java).text == "str40"
    assert sandbox.run_code("int unused = 1;", context=java).results == []


def test_errors_have_name_value_and_traceback(sandbox: Sandbox, java: object) -> None:
    """A thrown exception and a compile error are errors with name, message, traceback."""
    thrown = sandbox.run_code("Integer.parseInt(\"x1\")", context=java)
    assert thrown.error is not None
    assert thrown.error.name == "java.lang.NumberFormatException"
    assert 'For input string: "x1"' in thrown.error.value
    assert "at java.base/java.lang.Integer.parseInt" in thrown.error.traceback
    rejected = sandbox.run_code("String s = 5;", context=java)
    assert rejected.error is not None and rejected.error.name == "CompilationException"
    assert "incompatible types" in rejected.error.value
    assert sandbox.run_code("base", context=java).text == "40"  # state survived both


def test_env_vars_per_execution(sandbox: Sandbox, java: object) -> None:
    """Per-execution env vars are visible to that cell only."""
    scoped = sandbox.run_code('System.getenv("BAC_JAVA")', context=java, envs={"BAC_JAVA": "yes"})
    assert scoped.error is None, scoped.error
    assert scoped.text == "yes"
    assert sandbox.run_code('System.getenv("BAC_JAVA")', context=java).text == "null"


def test_client_timeout_stops_the_cell_and_keeps_state(sandbox: Sandbox, java: object) -> None:
    """An SDK timeout stops a running Java cell; variables defined before stay."""
    sandbox.run_code("int kept = 7;", context=java)
    with pytest.raises(Exception, match="timed out"):
        sandbox.run_code("while (true) { Thread.sleep(10); }", context=java, timeout=2)
    assert sandbox.run_code("kept * 6", context=java).text == "42"


def test_java_by_language_and_cwd(sandbox: Sandbox, tmp_path: object) -> None:
    """`language='java'` has a default context; a created one runs in its cwd."""
    assert sandbox.run_code("1 + 1", language="java").text == "2"
    context = sandbox.create_code_context(language="java", cwd=str(tmp_path))
    cwd = sandbox.run_code('System.getProperty("user.dir")', context=context)
    assert cwd.text == str(tmp_path)


async def test_async_sdk_runs_java(kernel_server: Daemon) -> None:
    """The async SDK gets Java's values and errors too."""
    sandbox = await AsyncSandbox.create(debug=True, sandbox_url=kernel_server.url)
    assert (await sandbox.run_code("6 * 7", language="java")).text == "42"
    failed = await sandbox.run_code("1 / 0", language="java")
    assert failed.error is not None and failed.error.name == "java.lang.ArithmeticException"
