"""DNS messages the resolver builds or reads (dnspython does the wire format).

A name the policy does not allow gets NXDOMAIN with the "Blocked" extended error
(RFC 8914) locally: the query never leaves the host, so DNS cannot carry data out of a
sandbox whose egress is closed.
"""

from __future__ import annotations

from dataclasses import dataclass

import dns.edns
import dns.exception
import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype

MIN_PIN_S = 60
MAX_PIN_S = 3600


@dataclass(frozen=True)
class Question:
    name: str  # lower case, no trailing dot
    qtype: str  # "A", "AAAA", ...
    message: dns.message.Message


def parse_question(wire: bytes) -> Question | None:
    """The query's single question, or None for anything that is not a plain query."""
    try:
        message = dns.message.from_wire(wire)
    except (dns.exception.DNSException, ValueError):
        return None
    if message.flags & dns.flags.QR or len(message.question) != 1:
        return None
    question = message.question[0]
    name = question.name.to_text(omit_final_dot=True).lower()
    return Question(name, dns.rdatatype.to_text(question.rdtype), message)


def _reply(question: Question, rcode: dns.rcode.Rcode, blocked: bool = False) -> bytes:
    response = dns.message.make_response(question.message)
    response.set_rcode(rcode)
    response.flags |= dns.flags.RA
    if blocked and question.message.edns >= 0:
        response.use_edns(0, options=[dns.edns.EDEOption(dns.edns.EDECode.BLOCKED,
                                                         "egress policy")])
    return response.to_wire()


def blocked(question: Question) -> bytes:
    return _reply(question, dns.rcode.NXDOMAIN, blocked=True)


def no_data(question: Question) -> bytes:
    """NOERROR without records (used for AAAA: sandboxes have no IPv6)."""
    return _reply(question, dns.rcode.NOERROR)


def server_failure(question: Question) -> bytes:
    return _reply(question, dns.rcode.SERVFAIL)


def formerr(wire: bytes) -> bytes | None:
    """FORMERR for something that looks like a query but does not parse, else nothing."""
    if len(wire) < 12:
        return None
    header = bytearray(wire[:12])
    header[2] = (header[2] | 0x80) & 0xF9  # QR set, AA/TC cleared
    header[3] = (header[3] & 0xF0) | dns.rcode.FORMERR
    return bytes(header[:4]) + b"\x00" * 8


def addresses(answer: bytes) -> tuple[int, list[tuple[str, int]]]:
    """(rcode, [(IPv4 address, TTL)]) of an upstream answer; CNAME chains are followed
    implicitly because every A record of the answer section is taken."""
    try:
        message = dns.message.from_wire(answer)
    except (dns.exception.DNSException, ValueError):
        return dns.rcode.SERVFAIL, []
    found: list[tuple[str, int]] = []
    for rrset in message.answer:
        if rrset.rdtype == dns.rdatatype.A:
            found += [(rdata.address, rrset.ttl) for rdata in rrset]
    return message.rcode(), found


def pin_seconds(ttl: int) -> int:
    """How long an answered address stays reachable: its TTL, within sane bounds, plus
    slack for clients that connect a little after they resolved."""
    return max(MIN_PIN_S, min(ttl, MAX_PIN_S)) + 10
