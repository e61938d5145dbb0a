"""Embedders: text to unit vectors, offline (deterministic) or through any OpenAI-compatible
``/v1/embeddings`` endpoint.

An embedder's :attr:`~Embedder.name` tags every vector it makes; vectors from another
embedder are stale (never compared with new ones) until ``standardagents memory reembed``.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from ._errors import EmbedderError

__all__ = ["Embedder", "EmbedderConfig", "OfflineEmbedder", "OpenAIEmbedder", "make_embedder", "normalise"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised vectors of :attr:`dims` floats."""

    name: str
    dims: int

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def normalise(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else [0.0 for _ in vector]


_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be by do does for from has have i in is it its me my of on or our so that the "
    "their them they this to was we were what when where which who why will with you your".split())


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


class OfflineEmbedder:
    """A deterministic bag-of-words embedder (feature hashing of stemmed words): texts that
    share words are near, with no model and no network. For tests, the quick start and
    offline demos; its ranking is lexical, not semantic."""

    def __init__(self, dims: int = 256) -> None:
        if dims < 8:
            raise ValueError("the offline embedder needs at least 8 dimensions")
        self.dims = dims
        self.name = f"offline-hash-{dims}"

    def embed_one(self, text: str) -> list[float]:
        vector = [0.0] * self.dims
        for word in _WORD.findall(text.lower()):
            if word in _STOP:
                continue
            digest = hashlib.blake2b(_stem(word).encode(), digest_size=8).digest()
            slot = int.from_bytes(digest[:4], "little") % self.dims
            vector[slot] += 1.0 if digest[4] & 1 else -1.0
        return normalise(vector)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed_one(t) for t in texts]


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint through the ``openai``
    SDK (OpenAI, Ollama, vLLM, LM Studio...). Failures become :class:`EmbedderError`."""

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 dims: int | None = None, timeout: float = 30.0) -> None:
        import openai

        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        self._dims_requested = dims
        self.dims = dims or 0
        self.name = f"openai:{model}" + (f":{dims}" if dims else "")
        key = api_key or os.environ.get("OPENAI_API_KEY") or "sk-no-key-required"
        # no idle connections are kept: an embedder may outlive the event loop that used it
        # (a server's memory store), and embedding calls come in batches, not a stream
        import httpx2

        http = httpx2.AsyncClient(timeout=timeout, limits=httpx2.Limits(max_keepalive_connections=0))
        self._client = openai.AsyncOpenAI(api_key=key, base_url=self.base_url, timeout=timeout, max_retries=1,
                                          http_client=http)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import openai

        if not texts:
            return []
        kwargs: dict[str, Any] = {"model": self.model, "input": list(texts)}
        if self._dims_requested:
            kwargs["dimensions"] = self._dims_requested
        try:
            response = await self._client.embeddings.create(**kwargs)
        except openai.APIStatusError as exc:
            raise EmbedderError(f"the embedding model {self.model!r} at {self.base_url} answered "
                                f"{exc.status_code}: {exc.message}") from exc
        except openai.APIError as exc:
            raise EmbedderError(f"the embedding model {self.model!r} at {self.base_url} could not be reached: "
                                f"{exc}") from exc
        rows = sorted(response.data, key=lambda d: d.index)
        if len(rows) != len(texts):
            raise EmbedderError(f"the embedding model {self.model!r} returned {len(rows)} vectors for {len(texts)} texts")
        vectors = [normalise([float(x) for x in row.embedding]) for row in rows]
        if not self.dims:
            self.dims = len(vectors[0])
        if any(len(v) != self.dims for v in vectors):
            raise EmbedderError(f"the embedding model {self.model!r} returned vectors of {len(vectors[0])} "
                                f"dimensions; {self.dims} were expected")
        return vectors

    async def aclose(self) -> None:
        await self._client.close()


class EmbedderConfig(BaseModel):
    """An embedding model definition: ``provider="offline"`` (deterministic, no network) or
    ``"openai"`` (any OpenAI-compatible ``/v1/embeddings``; the key read from ``api_key_env``)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, alias_generator=to_camel, frozen=True)

    provider: Literal["offline", "openai"] = "offline"
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    dimensions: int | None = Field(default=None, ge=8, le=16384)


def make_embedder(config: EmbedderConfig | str | None) -> Embedder:
    """The embedder a definition describes; ``"offline"`` (or None) is the offline one, and a
    bare string ``"openai:<model>"`` an OpenAI model with the environment's key and URL."""
    if config is None or config == "offline":
        return OfflineEmbedder()
    if isinstance(config, str):
        provider, _, model = config.partition(":")
        if provider != "openai" or not model:
            raise EmbedderError(f"unknown embedder {config!r}: use 'offline' or 'openai:<model>'")
        return OpenAIEmbedder(model)
    if config.provider == "offline":
        return OfflineEmbedder(config.dimensions or 256)
    if not config.model:
        raise EmbedderError("an openai embedder needs its model (e.g. text-embedding-3-small)")
    key = os.environ.get(config.api_key_env) if config.api_key_env else None
    if config.api_key_env and not key:
        raise EmbedderError(f"the embedder's API key variable {config.api_key_env!r} is not set")
    return OpenAIEmbedder(config.model, base_url=config.base_url, api_key=key, dims=config.dimensions)
