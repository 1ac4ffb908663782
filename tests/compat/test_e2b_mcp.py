"""E2B's in-sandbox MCP gateway (``Sandbox.create(mcp=...)``) through the official SDK: a
precise refusal naming what is missing and where Bac's own MCP server is."""

from __future__ import annotations

import pytest
from e2b import Sandbox, SandboxException

pytestmark = [pytest.mark.root]


def test_create_with_mcp_servers_names_what_is_missing() -> None:
    """No sandbox is made; the message names the server asked for, the gateway program
    and catalog that are missing, and Bac's alternatives."""
    with pytest.raises(SandboxException) as raised:
        Sandbox.create(mcp={"duckduckgo": {}})
    message = str(raised.value)
    assert "400" in message and "duckduckgo" in message
    assert "mcp-gateway" in message and "Docker's MCP catalog" in message
    assert "bac mcp" in message and "/mcp endpoint" in message
    assert all(s.template_id != "mcp-gateway" for s in Sandbox.list().next_items())
