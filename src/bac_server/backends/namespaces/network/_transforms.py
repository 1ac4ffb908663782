"""A ruled request made ready for its host: the rule's headers set and the secrets scoped
to the host put in for their placeholders.

The secrets *scoped* to a host are those its rules' header values name
(``HostRules.secrets``). In a request to that host:

* each header a rule sets replaces the sandbox's header of that name, with every
  placeholder resolved;
* a placeholder the sandbox wrote itself in a header value (``Authorization: Bearer
  ${e2b.secrets.key}``) is resolved when its secret is scoped to the host, and left as
  written otherwise; Host is never touched (it routed the request);
* a scoped secret the team does not have (deleted, or never made) refuses the request
  (``Unresolved``: the relay answers 502 saying which name, and sends nothing), as does
  a value holding a control character no header may (a line break would split the
  header; h11's own refusal would quote the value).

Nothing is ever resolved in a request to a host without rules, in a request line or a
body. Values are read per request (``SecretLookup``), so an update takes effect at the
next request, a delete at once; they are never logged.
"""

from __future__ import annotations

import re

import h11

from bac_server.backends.egress import PLACEHOLDER, HostRules, SecretLookup

from ._http_relay import Unanswerable

_NOT_IN_HEADER = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class Unresolved(Unanswerable):
    """The request needs a secret that cannot be put in; the message names it (never a
    value)."""


async def transformed(request: h11.Request, rules: HostRules, team: str,
                      lookup: SecretLookup | None) -> h11.Request:
    """``request`` as its ruled host gets it; raises ``Unresolved``."""
    scoped = rules.secrets
    sent = [(bytes(n), bytes(v)) for n, v in request.headers.raw_items()]
    set_by_rule = {name.lower().encode() for name, _v in rules.headers}
    # Every scoped secret, whether this request names it or not: a rule's headers name
    # them all, and a request's own placeholders may only name those.
    wanted = set(scoped)
    values: dict[str, str] = {}
    if wanted:
        if lookup is None or not team:
            raise Unresolved("this server resolves no secrets")
        try:
            values = await lookup(team, frozenset(wanted))
        except Exception:  # the store's failure, said without its detail
            raise Unresolved("the secrets could not be read; try again") from None
        missing = sorted(wanted - values.keys())
        if missing:
            raise Unresolved(f"secret {missing[0]!r} (named by the network rule for "
                             f"{rules.host}) does not exist")

    def resolve(text: str) -> str:
        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in scoped:
                return match.group(0)
            value = values[name]
            if _NOT_IN_HEADER.search(value):
                raise Unresolved(f"secret {name!r} holds a control character (a line "
                                 "break, NUL...), which no header value may")
            return value.encode().decode("latin-1")  # its UTF-8 bytes, as sent
        return PLACEHOLDER.sub(one, text)

    headers: list[tuple[bytes, bytes]] = []
    for name, value in sent:
        if name.lower() in set_by_rule:
            continue
        if name.lower() != b"host" and b"${e2b.secrets." in value:
            value = resolve(value.decode("latin-1")).encode("latin-1")
        headers.append((name, value))
    for rule_name, rule_value in rules.headers:
        headers.append((rule_name.encode(),
                        resolve(rule_value.encode().decode("latin-1")).encode("latin-1")))
    return h11.Request(method=request.method, target=request.target, headers=headers,
                       http_version=request.http_version)
