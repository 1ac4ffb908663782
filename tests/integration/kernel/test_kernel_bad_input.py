"""Bad input gets a clear status and message, and never hurts the server."""

from __future__ import annotations

import httpx
import pytest
from e2b import NotFoundException, SandboxException
from e2b_code_interpreter import Context, Sandbox
from kernel_harness import Daemon


def test_unknown_context_is_404(sandbox: Sandbox) -> None:
    """Running in a context id the server never made raises the SDK's NotFoundException."""
    ghost = Context("00000000-0000-0000-0000-000000000000", "python", "/")
    with pytest.raises(NotFoundException, match="not found"):
        sandbox.run_code("1", context=ghost)


def test_language_and_context_together_is_400(kernel_server: Daemon) -> None:
    """The server refuses a request naming both a context and a language."""
    context_id = httpx.post(f"{kernel_server.url}/contexts", json={}, timeout=60).json()["id"]
    body = {"code": "1", "context_id": context_id, "language": "python"}
    response = httpx.post(f"{kernel_server.url}/execute", json=body, timeout=60)
    assert response.status_code == 400
    assert "not both" in response.text


def test_unknown_language_is_a_clear_error(sandbox: Sandbox) -> None:
    """An unknown language names itself and the supported ones, for runs and contexts."""
    with pytest.raises(SandboxException, match=r"400.*Unknown language 'cobol'.*python"):
        sandbox.run_code("1", language="cobol")
    with pytest.raises(SandboxException, match=r"400.*Unknown language 'cobol'"):
        sandbox.create_code_context(language="cobol")


def test_missing_cwd_is_400(sandbox: Sandbox) -> None:
    """A context cannot be created in a directory that does not exist."""
    with pytest.raises(SandboxException, match=r"400.*not an existing directory"):
        sandbox.create_code_context(cwd="/no/such/dir")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"language": "python"}', "'code' must be a string"),
        (b'{"code": 1}', "'code' must be a string"),
        (b'{"code": "1", "env_vars": {"A": 1}}', "string values"),
        (b'{"code": "1", "env_vars": ["A"]}', "string values"),
        (b'{"code": "1", "context_id": 5}', "'context_id' must be a string"),
    ],
)
def test_malformed_execute_bodies_are_400(kernel_server: Daemon, body: bytes, message: str) -> None:
    """Each malformed /execute body is a 400 that says what is wrong."""
    response = httpx.post(f"{kernel_server.url}/execute", content=body, timeout=60)
    assert response.status_code == 400
    assert message in response.text


def test_malformed_context_bodies_are_400(kernel_server: Daemon) -> None:
    """A /contexts body that is not an object with string fields is a 400."""
    for body in (b"nope", b'{"language": 3}', b'{"cwd": ["/"]}'):
        response = httpx.post(f"{kernel_server.url}/contexts", content=body, timeout=60)
        assert response.status_code == 400, body


def test_server_still_serves_after_bad_input(sandbox: Sandbox) -> None:
    """After every kind of bad request, health and execution still work."""
    assert httpx.get(f"{sandbox._jupyter_url}/health", timeout=10).json() == "OK"
    assert sandbox.run_code("'fine'").text == "fine"
