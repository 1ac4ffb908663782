"""Bytes relayed one way between two streams, as every relay of the server does it (the
egress relay inside a node's network, a node's tunnel into its sandboxes)."""

from __future__ import annotations

import asyncio

CHUNK = 1 << 16


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int:
    """Copy until ``reader`` ends, then half-close ``writer`` (so the other direction may
    go on); returns how many bytes went. A side that fails ends this direction without
    an error: the caller's relay ends when both directions have."""
    total = 0
    try:
        while chunk := await reader.read(CHUNK):
            total += len(chunk)
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (OSError, RuntimeError):
        writer.close()
    return total
