"""The code interpreter's NDJSON lines fold into an Execution, one line at a time."""

from __future__ import annotations

import json

import pytest

import bac
from bac import Execution, ExecutionError, OutputMessage, Result
from bac._code import status_error
from bac._code_results import ExecutionParser


def _feed(parser: ExecutionParser, **line: object) -> object:
    return parser.feed(json.dumps(line) + "\n")


def test_full_stream_becomes_execution() -> None:
    """Output, results, error and count all land in the Execution, in arrival order."""
    parser = ExecutionParser()
    events = [
        _feed(parser, type="stdout", text="one\n", timestamp="2024-01-01T00:00:00Z"),
        _feed(parser, type="stderr", text="warn\n", timestamp="2024-01-01T00:00:01Z"),
        _feed(parser, type="keepalive"),
        _feed(parser, type="result", png="iVBORw0=", chart={"type": "line"},
              is_main_result=False),
        _feed(parser, type="result", text="42", html="<b>42</b>", is_main_result=True),
        _feed(parser, type="error", name="ValueError", value="bad", traceback="tb\nlines"),
        _feed(parser, type="number_of_executions", execution_count=7),
    ]
    assert not parser.ended
    assert _feed(parser, type="end_of_execution") is None
    assert parser.ended
    execution = parser.execution
    assert events[0] == OutputMessage("one\n", "2024-01-01T00:00:00Z", error=False)
    assert events[1] == OutputMessage("warn\n", "2024-01-01T00:00:01Z", error=True)
    assert events[2] is None and events[6] is None
    assert isinstance(events[3], Result) and events[3].chart == {"type": "line"}
    assert execution.logs.stdout == ["one\n"] and execution.logs.stderr == ["warn\n"]
    assert [r.formats() for r in execution.results] == [["png", "chart"], ["text", "html"]]
    assert execution.text == "42"
    assert execution.error == ExecutionError("ValueError", "bad", "tb\nlines")
    assert execution.execution_count == 7


def test_text_is_none_without_main_result() -> None:
    """Display-only results (plt.show) leave execution.text unset."""
    parser = ExecutionParser()
    _feed(parser, type="result", text="<Figure>", is_main_result=False)
    assert parser.execution.text is None
    assert Execution().text is None


def test_extra_and_unknown_types() -> None:
    """Other MIME types stay in extra; unknown line types and blank lines are ignored."""
    parser = ExecutionParser()
    result = _feed(parser, type="result", extra={"application/x-custom": "v"})
    assert isinstance(result, Result)
    assert result.extra == {"application/x-custom": "v"} and result.formats() == [
        "application/x-custom"]
    assert _feed(parser, type="something_new", x=1) is None
    assert parser.feed("   \n") is None
    assert len(parser.execution.results) == 1


@pytest.mark.parametrize("line", [b"not json\n", b"[1, 2]\n"])
def test_malformed_line_is_server_error(line: bytes) -> None:
    """A line that is not a JSON object is the server's fault, reported clearly."""
    with pytest.raises(bac.ServerError, match="kernel server"):
        ExecutionParser().feed(line)


@pytest.mark.parametrize(
    ("status", "body", "cls"),
    [
        (404, b"Context 'x' not found", bac.NotFoundError),
        (400, b"Unknown language 'cobol'", bac.InvalidArgumentError),
        (502, b'{"message": "The sandbox was not found", "code": 502}', bac.SandboxNotRunningError),
        (502, b'{"message": "The sandbox is running but port is not open", "code": 502}',
         bac.SandboxUnreachableError),
        (403, b"Token header 'e2b-traffic-access-token' is invalid", bac.PermissionDeniedError),
        (500, b"kernel could not start", bac.ServerError),
    ],
)
def test_status_errors_map_into_the_tree(status: int, body: bytes, cls: type[Exception]) -> None:
    """Each HTTP failure becomes the most specific SDK error and keeps the server's text."""
    error = status_error(status, body, "run_code")
    assert type(error) is cls
    assert error.status_code == status
    assert str(error).startswith("run_code: ")
    if status != 502:
        assert body.decode() in str(error)
