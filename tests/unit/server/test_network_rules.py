"""E2B's network rules as the egress relay applies them: what a policy accepts, which
host's rules a request gets, and how a request is made ready (the scope of secrets)."""

from __future__ import annotations

import ssl

import h11
import pytest

from bac_server.backends.egress import PolicyError, WirePolicy, parse_policy
from bac_server.backends.namespaces.network._relay_ca import RelayCa
from bac_server.backends.namespaces.network._transforms import Unresolved, transformed

DENY_ALL = ["0.0.0.0/0"]


def _policy(rules: object, allow: list[str] | None = None):  # type: ignore[no-untyped-def]
    return parse_policy(WirePolicy(allow or ["api.example.com", "*.cdn.test"], DENY_ALL,
                                   rules=rules, team="team-1"))


def _rule(headers: dict[str, str]) -> list[dict[str, object]]:
    return [{"transform": {"headers": headers}}]


@pytest.mark.parametrize(("rules", "why"), [
    ({"other.example.com": _rule({"X": "y"})}, "not allowed by a domain entry"),
    ({"1.2.3.4": _rule({"X": "y"})}, "not a host name"),
    ({"api.example.com:443": _rule({"X": "y"})}, "not a host name"),
    ({"api.example.com": _rule({"Host": "evil"})}, "header name a rule may set"),
    ({"api.example.com": _rule({"X": "a\r\nInjected: 1"})}, "not a header value"),
    ({"api.example.com": [{"transform": {"body": "x"}}]}, "takes only 'headers'"),
    ({"api.example.com": "not a list"}, "list of at most"),
])
def test_bad_rules_are_refused_naming_the_host(rules: object, why: str) -> None:
    """A rule no relayed connection would meet, or one that could change routing or
    framing, is refused with a message naming it."""
    with pytest.raises(PolicyError, match=why):
        _policy(rules)


def test_rules_need_allow_list_mode() -> None:
    """Domains in allowOut (and so rules) need 0.0.0.0/0 denied: the relay sees nothing
    otherwise."""
    with pytest.raises(PolicyError):
        parse_policy(WirePolicy(["api.example.com"], [],
                                rules={"api.example.com": _rule({"X": "y"})}))


def test_exact_host_wins_over_the_longest_wildcard() -> None:
    policy = _policy({"*.cdn.test": _rule({"X": "wild"}), "a.cdn.test": _rule({"X": "a"}),
                      "api.example.com": _rule({"X": "api"})})
    exact, wild = policy.rules_for("A.CDN.test."), policy.rules_for("b.cdn.test")
    assert exact is not None and dict(exact.headers)["X"] == "a"
    assert wild is not None and dict(wild.headers)["X"] == "wild"
    assert policy.rules_for("cdn.test") is None
    assert policy.rules_for("example.com") is None
    assert policy.to_wire()["rules"] == {
        "*.cdn.test": _rule({"X": "wild"}), "a.cdn.test": _rule({"X": "a"}),
        "api.example.com": _rule({"X": "api"})}


def _request(*headers: tuple[str, str]) -> h11.Request:
    return h11.Request(method="GET", target="/v1?k=${e2b.secrets.key}",
                       headers=[("Host", "api.example.com"), *headers])


async def _ready(request: h11.Request, values: dict[str, str]) -> dict[str, str]:
    policy = _policy({"api.example.com": _rule({"Authorization": "Bearer ${e2b.secrets.key}"})})
    asked: list[frozenset[str]] = []

    async def lookup(team: str, names: frozenset[str]) -> dict[str, str]:
        assert team == "team-1"
        asked.append(names)
        return {n: values[n] for n in names if n in values}

    rules = policy.rules_for("api.example.com")
    assert rules is not None and rules.secrets == {"key"}
    out = await transformed(request, rules, policy.team, lookup)
    assert asked == [frozenset({"key"})]  # only the scoped secret is ever read
    assert out.target == request.target  # the request line is never touched
    return {n.decode(): v.decode() for n, v in out.headers.raw_items()}


async def test_the_rule_and_scoped_placeholders_are_resolved_others_kept() -> None:
    """The rule's header replaces the sandbox's; a placeholder the sandbox wrote is
    resolved when scoped to the host; an unscoped one and Host stay as written."""
    headers = await _ready(_request(("authorization", "mine"),
                                    ("X-Own", "k=${e2b.secrets.key}"),
                                    ("X-Other", "${e2b.secrets.other}")),
                           {"key": "s3cr3t", "other": "never"})
    assert headers["Authorization"] == "Bearer s3cr3t"
    assert "authorization" not in headers
    assert headers["X-Own"] == "k=s3cr3t"
    assert headers["X-Other"] == "${e2b.secrets.other}"
    assert headers["Host"] == "api.example.com"


async def test_a_missing_secret_or_a_value_with_a_line_break_is_refused() -> None:
    with pytest.raises(Unresolved, match=r"'key'.*does not exist"):
        await _ready(_request(), {})
    with pytest.raises(Unresolved, match="control character") as caught:
        await _ready(_request(), {"key": "a\r\nX-Injected: 1"})
    assert "X-Injected" not in str(caught.value)


def test_the_relay_ca_signs_a_leaf_a_client_trusting_it_accepts() -> None:
    """The leaf minted for a host verifies against the sandbox's CA for that name only."""
    ca = RelayCa("test")
    server = ca.server_context("api.example.com")
    assert ca.server_context("api.example.com") is server  # cached
    client = ssl.create_default_context(cadata=ca.cert_pem)
    for name, ok in (("api.example.com", True), ("other.example.com", False)):
        c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
        tls_client = client.wrap_bio(c_in, c_out, server_hostname=name)
        tls_server = server.wrap_bio(s_in, s_out, server_side=True)
        failed = False
        for _ in range(10):
            for side in (tls_client, tls_server):
                try:
                    side.do_handshake()
                except ssl.SSLWantReadError:
                    pass
                except ssl.SSLError:
                    failed = True
            s_in.write(c_out.read())
            c_in.write(s_out.read())
            if failed:
                break
        assert failed is not ok, name
        if ok:
            assert tls_client.version() is not None  # the handshake completed


def test_the_owning_team_is_not_part_of_what_a_policy_lets_out() -> None:
    """A team's default policy is the default policy: a slot restored ahead under it serves
    any team's create that asks for the default (the pool compares policies)."""
    from bac_server.backends.egress import EgressPolicy

    assert parse_policy(WirePolicy(None, None, team="team-1")) == EgressPolicy()
    assert _policy({}) != EgressPolicy()
