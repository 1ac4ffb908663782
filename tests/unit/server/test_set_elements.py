"""The answers netfilter gives a set-element batch, read without the kernel: which one is
ours, and what it says."""

from __future__ import annotations

import errno
import struct

from bac_server.backends.namespaces.network.nft._set_elements import answer_to, encode_change

_HEADER = struct.Struct("=IHHII")
_NLMSG_ERROR = 2


def _answer(sequence: int, error: int) -> bytes:
    # nlmsgerr: the error, then the header of the message it answers (16 bytes).
    body = struct.pack("=i", -error) + _HEADER.pack(16, 0, 0, sequence, 0)
    return _HEADER.pack(_HEADER.size + len(body), _NLMSG_ERROR, 0, sequence, 0) + body


def test_the_answer_to_our_sequence_is_found_among_others() -> None:
    data = _answer(7, errno.EEXIST) + _answer(9, 0)
    assert answer_to(data, 9) == 0
    assert answer_to(data, 7) == errno.EEXIST
    assert answer_to(data, 8) is None


def test_other_messages_and_a_cut_datagram_are_not_answers() -> None:
    other = _HEADER.pack(_HEADER.size + 4, 3, 0, 5, 0) + b"\0" * 4  # NLMSG_DONE for 5
    assert answer_to(other + _answer(5, errno.ENOENT), 5) == errno.ENOENT
    assert answer_to(_answer(5, 0)[:10], 5) is None
    assert answer_to(_HEADER.pack(4, _NLMSG_ERROR, 0, 5, 0), 5) is None  # length too short


def test_a_change_is_one_batch_around_one_acknowledged_message() -> None:
    batch = encode_change("del", "held", "192.0.2.7", 40, table="t")
    kinds, offset = [], 0
    while offset < len(batch):
        length, kind, flags, sequence, _ = _HEADER.unpack_from(batch, offset)
        kinds.append((kind & 0xFF, sequence, bool(flags & 0x4)))  # NLM_F_ACK
        offset += (length + 3) & ~3
    assert kinds == [(0x10, 39, False), (0x0E, 40, True), (0x11, 41, False)]
    assert bytes([192, 0, 2, 7]) in batch and b"held\0" in batch and b"t\0" in batch
