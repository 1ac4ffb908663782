"""The server's ``/mcp`` endpoint (streamable HTTP) driven by the official MCP SDK's client,
authenticated with an API key; a missing or wrong key is refused before MCP sees it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_session import run_scenario, texts
from sdk_server import BacServer

pytestmark = [pytest.mark.root, pytest.mark.slow]

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "t", "version": "1"}}}
MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}


@asynccontextmanager
async def mcp_client(server: BacServer, headers: dict[str, str],
                     mode: str = "auto") -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60, read=300)) \
            as http, Client(streamable_http_client(server.url + "/mcp", http_client=http),
                            mode=mode) as client:
        yield client


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_session_over_http_with_the_key_header(bac_server: BacServer,
                                                       mode: str) -> None:
    """The issue's scenario through /mcp, the key in X-API-KEY, by a client of the
    current protocol and by one of the initialize handshake's."""
    async with mcp_client(bac_server, {"X-API-KEY": bac_server.api_key}, mode) as client:
        await run_scenario(client)


async def test_a_bearer_key_works_and_acts_as_its_own_team(bac_server: BacServer) -> None:
    """Authorization: Bearer is accepted; the tools act with that key, so another team's
    sandbox is not found through it."""
    async with mcp_client(bac_server, {"X-API-KEY": bac_server.api_key}) as mine:
        created = await mine.call_tool("create_sandbox", {"timeout": 120})
        assert created.structured_content is not None
        sandbox_id = created.structured_content["sandbox_id"]
        try:
            other = {"Authorization": f"Bearer {bac_server.other_team_key}"}
            async with mcp_client(bac_server, other) as theirs:
                seen = await theirs.call_tool("run_command", {"sandbox_id": sandbox_id,
                                                              "command": "id"})
                listed = await theirs.call_tool("list_sandboxes", {})
        finally:
            await mine.call_tool("kill_sandbox", {"sandbox_id": sandbox_id})
    assert seen.is_error and sandbox_id in texts(seen)
    assert sandbox_id not in texts(listed)


@pytest.mark.parametrize(("headers", "message"), [
    ({}, "missing API key"),
    ({"X-API-KEY": "bac_not_a_key"}, "invalid API key"),
    ({"Authorization": "Bearer bac_not_a_key"}, "invalid API key"),
])
def test_a_missing_or_wrong_key_is_refused(bac_server: BacServer, headers: dict[str, str],
                                           message: str) -> None:
    """401 with the REST API's JSON error shape, before any MCP message is read."""
    answer = httpx.post(bac_server.url + "/mcp", json=INITIALIZE,
                        headers=MCP_ACCEPT | headers, timeout=30)
    assert answer.status_code == 401
    assert answer.json() == {"code": 401, "message": answer.json()["message"]}
    assert message in answer.json()["message"]


async def test_the_mcp_client_with_a_wrong_key_fails_to_connect(
        bac_server: BacServer) -> None:
    """The SDK's client sees the refusal as an MCP error and never gets a session (the
    SDK keeps the status to itself; the raw 401 is checked above)."""
    with pytest.raises(BaseException) as raised:
        async with mcp_client(bac_server, {"X-API-KEY": "bac_not_a_key"}) as client:
            await client.list_tools()
    assert any(isinstance(e, MCPError) for e in _leaves(raised.value))


def _leaves(error: BaseException) -> list[BaseException]:
    """The exceptions inside an exception's groups (the SDK's task groups wrap them)."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]
