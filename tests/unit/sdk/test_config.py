"""Connection settings resolve argument > BAC_* > E2B_* > default, and bad values fail early."""

from __future__ import annotations

import pytest

from bac import AuthenticationError, InvalidArgumentError
from bac._config import DEFAULT_API_URL, ConnectionConfig


def test_defaults_with_empty_environment() -> None:
    """With nothing configured the SDK targets a local server and has no key."""
    config = ConnectionConfig.resolve(env={})
    assert config.api_url == DEFAULT_API_URL
    assert config.api_key is None
    assert config.envd_url() == DEFAULT_API_URL
    assert config.request_timeout == 60.0


def test_bac_variables_win_over_e2b_ones() -> None:
    """BAC_* settings take precedence over their E2B_* fallbacks."""
    env = {
        "BAC_API_URL": "http://bac:1/",
        "E2B_API_URL": "http://e2b:2",
        "BAC_API_KEY": "bac-key",
        "E2B_API_KEY": "e2b-key",
    }
    config = ConnectionConfig.resolve(env=env)
    assert config.api_url == "http://bac:1"
    assert config.api_key == "bac-key"


def test_e2b_variables_are_fallbacks() -> None:
    """A shell set up for the official SDK works unchanged."""
    env = {
        "E2B_API_URL": "http://e2b:2",
        "E2B_API_KEY": "e2b-key",
        "E2B_SANDBOX_URL": "http://gateway:9",
    }
    config = ConnectionConfig.resolve(env=env)
    assert (config.api_url, config.api_key) == ("http://e2b:2", "e2b-key")
    assert config.envd_url() == "http://gateway:9"


def test_arguments_win_over_environment() -> None:
    """Explicit arguments override every environment variable."""
    env = {"BAC_API_URL": "http://bac:1", "BAC_API_KEY": "k"}
    config = ConnectionConfig.resolve(api_url="https://x.example", api_key="arg", env=env)
    assert (config.api_url, config.api_key) == ("https://x.example", "arg")


def test_zero_request_timeout_means_unlimited() -> None:
    """request_timeout=0 disables the deadline; per-call 0 does too."""
    config = ConnectionConfig.resolve(request_timeout=0, env={})
    assert config.request_timeout is None
    default = ConnectionConfig.resolve(env={})
    assert default.timeout(None) == 60.0
    assert default.timeout(0) is None
    assert default.timeout(5) == 5


@pytest.mark.parametrize("url", ["localhost:3000", "ftp://x", "http://"])
def test_malformed_url_is_rejected(url: str) -> None:
    """A URL without http(s) scheme and host fails with the setting named."""
    with pytest.raises(InvalidArgumentError, match="api_url"):
        ConnectionConfig.resolve(api_url=url, env={})


def test_bad_timeout_variable_is_rejected() -> None:
    """A non-numeric BAC_REQUEST_TIMEOUT is reported, not silently ignored."""
    with pytest.raises(InvalidArgumentError, match="BAC_REQUEST_TIMEOUT"):
        ConnectionConfig.resolve(env={"BAC_REQUEST_TIMEOUT": "soon"})


def test_missing_key_is_an_authentication_error() -> None:
    """Calls needing the API fail before any request when no key is configured."""
    with pytest.raises(AuthenticationError, match="BAC_API_KEY"):
        ConnectionConfig.resolve(env={}).require_api_key()


def test_host_domain_falls_back_to_api_host() -> None:
    """Per-port host names use the server's domain, else config, else the API host."""
    config = ConnectionConfig.resolve(api_url="http://127.0.0.1:3000", env={})
    assert config.host_domain() == "127.0.0.1:3000"
    assert config.host_domain("sbx.example") == "sbx.example"
    assert ConnectionConfig.resolve(domain="d.test", env={}).host_domain() == "d.test"
