"""Streamed calls of the OpenAI-compatible provider reuse their connection: a finished stream
is read to its end, so its connection goes back to the pool (a real TCP proxy counts them)."""

from __future__ import annotations

import asyncio

from standardagents.providers import OpenAIProvider
from standardagents.providers.base import ModelRequest, StreamEnd
from standardagents.testing import OpenAIStub, StubReply
from standardagents.testing.proxy import CuttableProxy


class CountingProxy(CuttableProxy):
    """The proxy, counting the connections it accepts."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        super().__init__(upstream)
        self.accepted = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        await super()._serve(reader, writer)


async def test_three_streamed_calls_in_a_row_use_one_connection() -> None:
    replies = [StubReply(text=f"answer {n}", chunk_size=3) for n in range(3)]
    async with OpenAIStub(lambda body: replies.pop(0)) as stub:
        proxy = CountingProxy((stub.host, stub.port))
        await proxy.start()
        provider = OpenAIProvider(f"http://127.0.0.1:{proxy.port}/v1", timeout=5.0, max_retries=0, pool_shards=1)
        try:
            texts = []
            for _ in range(3):
                async for delta in provider.stream(ModelRequest(model="stub-model",
                                                                messages=[{"role": "user", "content": "hi"}])):
                    if isinstance(delta, StreamEnd):
                        texts.append(delta.response.text)
        finally:
            await provider.aclose()
            await proxy.aclose()
    assert texts == ["answer 0", "answer 1", "answer 2"]
    assert proxy.accepted == 1
