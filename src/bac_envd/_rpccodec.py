"""The codecs envd reads RPC messages with (imported with the RPC stack).

connectrpc answers a request body that does not decode (not JSON, a field of the wrong
type) with ``unknown`` and HTTP 500, as if envd had failed. Such a body is the client's
mistake: wrapped here, it is ``invalid_argument`` (400 for a unary call, the end-stream
error of a stream), naming the message it is not.
"""

from __future__ import annotations

from typing import Any

from connectrpc.code import Code
from connectrpc.codec import Codec, proto_binary_codec, proto_json_codec
from connectrpc.errors import ConnectError


class _RequestCodec:
    """``inner``, with a body it cannot decode reported as the client's mistake."""

    def __init__(self, inner: Codec[Any, Any]) -> None:
        self._inner = inner

    def name(self) -> str:
        return self._inner.name()

    def encode(self, message: Any) -> bytes:
        return self._inner.encode(message)

    def decode(self, data: bytes | bytearray, message_class: type[Any]) -> Any:
        try:
            return self._inner.decode(data, message_class)
        except Exception as exc:  # any failure to decode is the body's fault
            raise ConnectError(Code.INVALID_ARGUMENT,
                               f"the request is not a {message_class.__name__} in "
                               f"{self.name()}: {exc}") from exc


def request_codecs() -> list[Codec[Any, Any]]:
    """The codecs connectrpc serves by default (binary and JSON protobuf), wrapped."""
    return [_RequestCodec(proto_binary_codec()), _RequestCodec(proto_json_codec())]
