"""Where the /mcp endpoint's tools reach the server's own API (``ServerConfig.self_url``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bac_server.config import ConfigError, ServerConfig


@pytest.mark.parametrize(("given", "url"), [
    ({}, "http://127.0.0.1:3000"),
    ({"host": "0.0.0.0", "port": 8080}, "http://127.0.0.1:8080"),  # every address: loopback
    ({"host": "::"}, "http://[::1]:3000"),
    ({"host": "10.1.2.3"}, "http://10.1.2.3:3000"),
    ({"tls_cert": Path("c.pem"), "tls_key": Path("k.pem")}, "https://127.0.0.1:3000"),
    ({"mcp_api_url": "https://bac.example.com/"}, "https://bac.example.com"),
])
def test_the_server_reaches_itself_where_it_listens(given: dict[str, object],
                                                     url: str) -> None:
    assert ServerConfig(**given).self_url == url  # type: ignore[arg-type]


def test_the_override_comes_from_the_environment() -> None:
    config = ServerConfig.from_env({"BAC_MCP_API_URL": "https://bac.internal:8443"})
    assert config.self_url == "https://bac.internal:8443"


def test_an_override_that_is_no_url_is_refused_at_start() -> None:
    with pytest.raises(ConfigError, match="BAC_MCP_API_URL 'bac:3000' is not an http"):
        ServerConfig(mcp_api_url="bac:3000")
