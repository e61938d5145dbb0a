"""JSON and stream plumbing shared by the providers that speak HTTP through an SDK's raw client.

A model call's client-side CPU is mostly the JSON of its body and of each streamed chunk, so
both go through orjson (one parse per chunk, no SDK object per delta), with the standard
library as the fallback for the few documents orjson refuses.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import orjson

__all__ = ["DRAIN_BYTES", "DRAIN_SECONDS", "decode_json", "drain", "encode_body"]

#: after a stream's last event: how long and how much more of it is read to keep its connection
DRAIN_SECONDS = 0.5
DRAIN_BYTES = 64 * 1024


def encode_body(body: dict[str, Any]) -> bytes:
    """The request body as compact UTF-8 JSON: orjson (a few times faster on a long history),
    or the standard library for what orjson refuses (integers past 64 bits), so a body that
    cannot be sent is refused with the same error as before. (A NaN becomes ``null``, valid
    JSON, where the standard library wrote a bare ``NaN``.)"""
    try:
        return orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def decode_json(payload: bytes | str) -> Any:
    """One JSON document (a body or a stream chunk): orjson, or the standard library for what
    orjson refuses (``NaN``, ``Infinity``); a ``ValueError`` when it is not JSON."""
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        return json.loads(payload)


async def drain(chunks: AsyncIterator[bytes], errors: tuple[type[BaseException], ...]) -> None:
    """Read what follows a stream's last event (normally only the end of the chunked body), so
    the connection goes back to the pool: closing a response with its body unread closes the
    connection, and the next call would open a new one. A server that keeps sending, stalls or
    fails after the last event is cut off (the reply is complete either way); ``errors`` are
    the transport failures that end the draining quietly."""
    left = DRAIN_BYTES
    quiet: tuple[type[BaseException], ...] = (TimeoutError, *errors)
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            async for raw in chunks:
                left -= len(raw)
                if left < 0:
                    return
    except quiet:
        return
