"""Every language answers as E2B's interpreter does: the last expression is the cell's text
result, a failure is an error with name, value and traceback (sync and async SDK)."""

from __future__ import annotations

import pytest
from conftest import needs
from e2b import TimeoutException
from e2b_code_interpreter import AsyncSandbox, Sandbox
from kernel_harness import Daemon


@needs("tslab")
@pytest.mark.parametrize("language", ["javascript", "typescript"])
def test_js_last_expression_is_the_text_result(sandbox: Sandbox, language: str) -> None:
    """A JS/TS cell's last value is `execution.text` (strings bare), not printed stdout."""
    context = sandbox.create_code_context(language=language)
    execution = sandbox.run_code("const n = 40;\nconsole.log('side');\nn + 2", context=context)
    assert execution.error is None, execution.error
    assert execution.text == "42"
    assert execution.logs.stdout == ["side\n"]
    assert [r.is_main_result for r in execution.results] == [True]
    assert sandbox.run_code("'a' + 'b'", context=context).text == "ab"
    assert sandbox.run_code("({ k: [1, 2] })", context=context).text == "{ k: [ 1, 2 ] }"
    awaited = sandbox.run_code("await Promise.resolve(7)", context=context)
    assert awaited.text == "7"
    assert sandbox.run_code("let unused = 1", context=context).results == []


@needs("tslab")
def test_js_thrown_error_has_name_value_and_traceback(sandbox: Sandbox) -> None:
    """A thrown JS error is an error (not stderr) with its class, message and stack."""
    execution = sandbox.run_code(
        "function boom() { throw new RangeError('too far') }\nboom()", language="js"
    )
    assert execution.error is not None
    assert (execution.error.name, execution.error.value) == ("RangeError", "too far")
    assert "RangeError: too far" in execution.error.traceback
    assert "at boom" in execution.error.traceback
    assert "tslab" not in execution.error.traceback
    assert execution.logs.stderr == []
    rejected = sandbox.run_code("await Promise.reject(new TypeError('async no'))", language="js")
    assert rejected.error is not None
    assert (rejected.error.name, rejected.error.value) == ("TypeError", "async no")
    assert sandbox.run_code("1 + 1", language="js").text == "2"  # the next cell runs


@needs("tslab")
def test_js_errors_found_before_running_are_named_as_node_would(sandbox: Sandbox) -> None:
    """Compile-time problems become errors named as node names them at run time."""
    unknown = sandbox.run_code("notDefinedAnywhere + 1", language="js")
    assert unknown.error is not None and unknown.error.name == "ReferenceError"
    assert "notDefinedAnywhere" in unknown.error.value
    syntax = sandbox.run_code("let broken = (", language="js")
    assert syntax.error is not None and syntax.error.name == "SyntaxError"
    typed = sandbox.run_code("const s: string = 5", language="ts")
    assert typed.error is not None and typed.error.name == "TypeError"
    assert "not assignable" in typed.error.value


@needs("R")
def test_r_last_value_is_the_main_result(sandbox: Sandbox) -> None:
    """R's last visible value is `execution.text`; earlier visible values stay results."""
    execution = sandbox.run_code("x <- 20\nx\nx + 22", language="r")
    assert execution.error is None, execution.error
    assert execution.text == "[1] 42"
    assert [(r.text, r.is_main_result) for r in execution.results] == [
        ("[1] 20", False), ("[1] 42", True),
    ]
    assert sandbox.run_code("invisible(1)", language="r").results == []
    failed = sandbox.run_code("stop('boom')", language="r")
    assert failed.error is not None
    assert failed.error.name == "ERROR" and "boom" in failed.error.value


def test_bash_error_has_a_name_and_the_exit_status(sandbox: Sandbox) -> None:
    """A failing last command is an error named `Error` whose value is its exit status."""
    execution = sandbox.run_code("echo out; exit_with() { return 3; }; exit_with", language="bash")
    assert execution.error is not None
    assert (execution.error.name, execution.error.value) == ("Error", "3")
    assert execution.logs.stdout == ["out\n"]


@needs("tslab")
async def test_async_sdk_gets_js_and_python_results(kernel_server: Daemon) -> None:
    """The async SDK sees the same text results and errors."""
    sandbox = await AsyncSandbox.create(debug=True, sandbox_url=kernel_server.url)
    assert (await sandbox.run_code("6 * 7", language="js")).text == "42"
    assert (await sandbox.run_code("6 * 7")).text == "42"
    failed = await sandbox.run_code("throw new SyntaxError('odd')", language="js")
    assert failed.error is not None and failed.error.name == "SyntaxError"


@needs("tslab")
def test_js_client_timeout_interrupts_and_keeps_state(sandbox: Sandbox) -> None:
    """A JS cell stuck in a loop is interrupted when the client times out; earlier
    variables survive and the next cell runs."""
    context = sandbox.create_code_context(language="js")
    sandbox.run_code("var kept = 21", context=context)
    with pytest.raises(TimeoutException):
        sandbox.run_code("while (true) {}", context=context, timeout=1)
    assert sandbox.run_code("kept * 2", context=context, timeout=30).text == "42"
