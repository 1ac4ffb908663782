"""nf_tables messages for one sandbox's changes, built with pyroute2's message classes.

Each mirrors what nft 1.0.6 sends for the same command (``nft --debug=netlink``: the same
attributes, registers and user data), so what Bac makes lists as nft's own would. pyroute2
has no class for stateful objects (``NFT_MSG_NEWOBJ``, a named counter); ``nft_obj_msg``
is that one.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any

from pyroute2.netlink import NLM_F_APPEND, NLM_F_CREATE, NLM_F_REQUEST, nla
from pyroute2.netlink.nfnetlink import NFNL_SUBSYS_NFTABLES, nfgen_msg
from pyroute2.netlink.nfnetlink.nftsocket import (
    NFPROTO_INET,
    NFT_MSG_DELCHAIN,
    NFT_MSG_DELOBJ,
    NFT_MSG_DELRULE,
    NFT_MSG_DELSET,
    NFT_MSG_DELSETELEM,
    NFT_MSG_GETCHAIN,
    NFT_MSG_GETOBJ,
    NFT_MSG_GETSETELEM,
    NFT_MSG_NEWCHAIN,
    NFT_MSG_NEWOBJ,
    NFT_MSG_NEWRULE,
    NFT_MSG_NEWSET,
    NFT_MSG_NEWSETELEM,
    nft_chain_msg,
    nft_rule_msg,
    nft_set_elem_list_msg,
    nft_set_msg,
)

from ._elements import Element, Style

NFT_OBJECT_COUNTER = 1
_NFT_JUMP = -3
# nft's description of ``type ipv4_addr . inet_proto . inet_service`` (key byte order and
# field types), what ``nft list`` reads to print the keys.
_LOG_KEY_TYPE = (7 << 12) | (12 << 6) | 13
_LOG_KEY_LEN = 12
_LOG_USERDATA = bytes.fromhex("0004000000000308" "00040d0000000100")
_ELEMENTS_PER_MESSAGE = 200  # an attribute holds at most 64 KiB
# NFT_SET_ELEM_INTERVAL_END (bit 0): pyroute2 sets bit i for each i-th key of its flag
# names, which for this attribute are {1: name}.
_INTERVAL_END = {1}


class Op(enum.Enum):
    ADD = "add"
    DELETE = "delete"


class nft_obj_msg(nfgen_msg):  # type: ignore[misc]  # pyroute2 is untyped
    """A stateful object (only counters here)."""

    prefix = "NFTA_OBJ_"
    nla_map = (
        ("NFTA_OBJ_UNSPEC", "none"),
        ("NFTA_OBJ_TABLE", "asciiz"),
        ("NFTA_OBJ_NAME", "asciiz"),
        ("NFTA_OBJ_TYPE", "be32"),
        ("NFTA_OBJ_DATA", "counter"),
        ("NFTA_OBJ_USE", "be32"),
        ("NFTA_OBJ_HANDLE", "be64"),
        ("NFTA_OBJ_PAD", "hex"),
        ("NFTA_OBJ_USERDATA", "hex"),
    )

    class counter(nla):  # type: ignore[misc]
        nla_map = (
            ("NFTA_COUNTER_UNSPEC", "none"),
            ("NFTA_COUNTER_BYTES", "be64"),
            ("NFTA_COUNTER_PACKETS", "be64"),
        )


def _message(cls: type[nfgen_msg], command: int, flags: int,
             attrs: list[list[Any]]) -> nfgen_msg:
    message = cls()
    message["attrs"] = attrs
    message["header"]["type"] = (NFNL_SUBSYS_NFTABLES << 8) | command
    message["header"]["flags"] = NLM_F_REQUEST | flags
    message["nfgen_family"] = NFPROTO_INET
    return message


def _value(data: bytes) -> dict[str, Any]:
    return {"attrs": [["NFTA_DATA_VALUE", data]]}


def _element(element: Element, timeout_ms: int | None,
             extra: Iterable[list[Any]] = ()) -> list[dict[str, Any]]:
    """The netlink elements of one element: two for an rbtree interval (its start, and
    where it ends flagged as an interval's end)."""
    attrs: list[list[Any]] = [["NFTA_SET_ELEM_KEY", _value(element.key)]]
    if element.end is not None and element.style is Style.END_KEY:
        attrs.append(["NFTA_SET_ELEM_KEY_END", _value(element.end)])
    if timeout_ms is not None:
        attrs.append(["NFTA_SET_ELEM_TIMEOUT", timeout_ms])
    attrs.extend(extra)
    if element.end is None or element.style is not Style.END_ELEMENT:
        return [{"attrs": attrs}]
    return [{"attrs": attrs},
            {"attrs": [["NFTA_SET_ELEM_KEY", _value(element.end)],
                       ["NFTA_SET_ELEM_FLAGS", _INTERVAL_END]]}]


def _element_list(op: Op, table: str, set_name: str,
                  encoded: list[dict[str, Any]]) -> nfgen_msg:
    command = NFT_MSG_NEWSETELEM if op is Op.ADD else NFT_MSG_DELSETELEM
    return _message(nft_set_elem_list_msg, command, NLM_F_CREATE if op is Op.ADD else 0,
                    [["NFTA_SET_ELEM_LIST_TABLE", table],
                     ["NFTA_SET_ELEM_LIST_SET", set_name],
                     ["NFTA_SET_ELEM_LIST_ELEMENTS", encoded]])


def elements(op: Op, table: str, items: Iterable[Element],
             timeout_ms: int | None = None) -> list[nfgen_msg]:
    """Add (without ``NLM_F_EXCL``: an existing element stays, its timeout renewed) or
    delete ``items``, one message per set and a few hundred elements."""
    by_set: dict[str, list[Element]] = {}
    for item in items:
        by_set.setdefault(item.set, []).append(item)
    messages = []
    for set_name, members in by_set.items():
        for start in range(0, len(members), _ELEMENTS_PER_MESSAGE):
            chunk = members[start:start + _ELEMENTS_PER_MESSAGE]
            messages.append(_element_list(op, table, set_name, [
                encoded for m in chunk
                for encoded in _element(m, timeout_ms if op is Op.ADD else None)]))
    return messages


def jump_entry(op: Op, table: str, entry: Element, chain: str) -> nfgen_msg:
    """``key : jump chain`` in a verdict map (only the key when deleting)."""
    extra = [["NFTA_SET_ELEM_DATA", {"attrs": [["NFTA_DATA_VERDICT", {"attrs": [
        ["NFTA_VERDICT_CODE", _NFT_JUMP], ["NFTA_VERDICT_CHAIN", chain]]}]]}]]
    return _element_list(op, table, entry.set, _element(entry, None, extra if op is Op.ADD else ()))


def counter_entry(op: Op, table: str, entry: Element, counter: str) -> nfgen_msg:
    """``key : "counter"`` in a map of counters (only the key when deleting)."""
    extra = [["NFTA_SET_ELEM_OBJREF", counter]]
    return _element_list(op, table, entry.set, _element(entry, None, extra if op is Op.ADD else ()))


def counter(op: Op, table: str, name: str) -> nfgen_msg:
    attrs: list[list[Any]] = [["NFTA_OBJ_TABLE", table], ["NFTA_OBJ_NAME", name],
                              ["NFTA_OBJ_TYPE", NFT_OBJECT_COUNTER]]
    if op is Op.ADD:
        attrs.append(["NFTA_OBJ_DATA", {"attrs": [["NFTA_COUNTER_BYTES", 0],
                                                  ["NFTA_COUNTER_PACKETS", 0]]}])
        return _message(nft_obj_msg, NFT_MSG_NEWOBJ, NLM_F_CREATE, attrs)
    return _message(nft_obj_msg, NFT_MSG_DELOBJ, 0, attrs)


def log_set(op: Op, table: str, name: str, size: int, timeout_ms: int) -> nfgen_msg:
    """``set name { type ipv4_addr . inet_proto . inet_service; flags dynamic,timeout;
    timeout ...; size ...; counter; }``: a bounded log filled by the packet path."""
    attrs: list[list[Any]] = [["NFTA_SET_TABLE", table], ["NFTA_SET_NAME", name]]
    if op is Op.DELETE:
        return _message(nft_set_msg, NFT_MSG_DELSET, 0, attrs)
    attrs += [["NFTA_SET_FLAGS", {"NFT_SET_TIMEOUT", "NFT_SET_EVAL"}],
              ["NFTA_SET_KEY_TYPE", _LOG_KEY_TYPE],
              ["NFTA_SET_KEY_LEN", _LOG_KEY_LEN],
              ["NFTA_SET_ID", 1],  # required; refers to the set within its batch
              ["NFTA_SET_DESC", {"attrs": [["NFTA_SET_DESC_SIZE", size]]}],
              ["NFTA_SET_TIMEOUT", timeout_ms],
              ["NFTA_SET_USERDATA", _LOG_USERDATA],
              ["NFTA_SET_EXPR", _expr("counter", [])]]
    return _message(nft_set_msg, NFT_MSG_NEWSET, NLM_F_CREATE, attrs)


def chain(op: Op, table: str, name: str) -> nfgen_msg:
    """A regular chain; deleting one deletes its rules (it must not be jumped to)."""
    command, flags = (NFT_MSG_NEWCHAIN, NLM_F_CREATE) if op is Op.ADD else (NFT_MSG_DELCHAIN, 0)
    return _message(nft_chain_msg, command, flags,
                    [["NFTA_CHAIN_TABLE", table], ["NFTA_CHAIN_NAME", name]])


def flush_chain(table: str, name: str) -> nfgen_msg:
    return _message(nft_rule_msg, NFT_MSG_DELRULE, 0,
                    [["NFTA_RULE_TABLE", table], ["NFTA_RULE_CHAIN", name]])


def _expr(name: str, data: list[list[Any]]) -> dict[str, Any]:
    return {"attrs": [["NFTA_EXPR_NAME", name], ["NFTA_EXPR_DATA", {"attrs": data}]]}


def log_rule(table: str, chain_name: str, set_name: str) -> nfgen_msg:
    """``update @set { ip daddr . meta l4proto . th dport }`` (in an inet table: for
    IPv4 only), as nft compiles it."""
    reg1, reg32_01, reg32_02 = 1, 9, 10
    network, transport = 1, 2
    meta_nfproto, meta_l4proto = 15, 16
    nfproto_ipv4 = 2
    dynset_update = 1
    exprs = [
        _expr("meta", [["NFTA_META_KEY", meta_nfproto], ["NFTA_META_DREG", reg1]]),
        _expr("cmp", [["NFTA_CMP_SREG", reg1], ["NFTA_CMP_OP", 0],
                      ["NFTA_CMP_DATA", _value(bytes((nfproto_ipv4,)))]]),
        _expr("payload", [["NFTA_PAYLOAD_DREG", reg1], ["NFTA_PAYLOAD_BASE", network],
                          ["NFTA_PAYLOAD_OFFSET", 16], ["NFTA_PAYLOAD_LEN", 4]]),
        _expr("meta", [["NFTA_META_KEY", meta_l4proto], ["NFTA_META_DREG", reg32_01]]),
        _expr("payload", [["NFTA_PAYLOAD_DREG", reg32_02], ["NFTA_PAYLOAD_BASE", transport],
                          ["NFTA_PAYLOAD_OFFSET", 2], ["NFTA_PAYLOAD_LEN", 2]]),
        _expr("dynset", [["NFTA_DYNSET_SREG_KEY", reg1], ["NFTA_DYNSET_OP", dynset_update],
                         ["NFTA_DYNSET_SET_NAME", set_name]]),
    ]
    return _message(nft_rule_msg, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND,
                    [["NFTA_RULE_TABLE", table], ["NFTA_RULE_CHAIN", chain_name],
                     ["NFTA_RULE_EXPRESSIONS", exprs]])


# -- reads ----------------------------------------------------------------------------


def get_counter(table: str, name: str) -> nfgen_msg:
    return _message(nft_obj_msg, NFT_MSG_GETOBJ, 0,
                    [["NFTA_OBJ_TABLE", table], ["NFTA_OBJ_NAME", name],
                     ["NFTA_OBJ_TYPE", NFT_OBJECT_COUNTER]])


def get_chain(table: str, name: str) -> nfgen_msg:
    return _message(nft_chain_msg, NFT_MSG_GETCHAIN, 0,
                    [["NFTA_CHAIN_TABLE", table], ["NFTA_CHAIN_NAME", name]])


def list_elements(table: str, set_name: str) -> nfgen_msg:
    """Every element of one set (to be sent as a dump)."""
    return _message(nft_set_elem_list_msg, NFT_MSG_GETSETELEM, 0,
                    [["NFTA_SET_ELEM_LIST_TABLE", table],
                     ["NFTA_SET_ELEM_LIST_SET", set_name]])


def counter_bytes(answer: bytes) -> int:
    """The byte count of a counter object ``get_counter`` answered with."""
    message = nft_obj_msg(answer)
    message.decode()
    data = message.get_attr("NFTA_OBJ_DATA")
    return int(data.get_attr("NFTA_COUNTER_BYTES") or 0) if data is not None else 0


def decoded_elements(answers: Sequence[bytes]) -> list[nla]:
    """The element attributes of the messages a ``list_elements`` dump answered with."""
    found: list[nla] = []
    for answer in answers:
        message = nft_set_elem_list_msg(answer)
        message.decode()
        found.extend(message.get_attr("NFTA_SET_ELEM_LIST_ELEMENTS") or [])
    return found
