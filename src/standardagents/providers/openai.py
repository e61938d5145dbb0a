"""Any OpenAI-compatible chat-completions endpoint, with the official ``openai`` SDK's client.

The SDK's client (``provider.client``) supplies the headers (key, organisation, project, user
agent) and the base URL; this module sends the request body as prepared JSON through aiohttp
(:mod:`._http`, a compiled response parser) and reads replies as plain JSON (skipping the
SDK's typed request transformation and response models and httpx2's pure-Python parsing),
because that per-request work dominated client CPU. HTTP errors are decoded as the SDK
decodes them. Retries are ours: a request that fails before its first token is retried with
a short backoff; once tokens have been delivered, a failure is reported instead.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import random
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx2
import openai

from ..exceptions import ProviderError
from ..observability.tracing import trace_headers
from ..records import ToolCall, Usage
from ._http import HTTPClient, HTTPReply, SDKReply, TransportFailure, ssl_context
from ._wire import decode_json as _decode
from ._wire import drain
from ._wire import encode_body as _encode
from .base import (
    ModelProvider,
    ModelRequest,
    ModelResponse,
    ReasoningDelta,
    StreamDelta,
    StreamEnd,
    TextDelta,
    ToolCallDelta,
)

__all__ = ["DEFAULT_BASE_URL", "OpenAIProvider", "is_local_url", "usage_from_openai"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_PLACEHOLDER_KEY = "sk-no-key-required"
_RETRY_STATUSES = frozenset({408, 409, 429})
_BACKOFF_BASE = 0.05
_BACKOFF_CAP = 2.0
_RETRY_AFTER_CAP = 10.0
_KEEPALIVE = 1000
_POOL_SHARDS = 8


def is_local_url(url: str) -> bool:
    """True for loopback, private-network and ``*.local`` hosts (Ollama, vLLM, LM Studio)."""
    host = (urlsplit(url).hostname or "").lower()
    if host in ("localhost", "0.0.0.0", "host.docker.internal") or host.endswith((".local", ".localhost")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def usage_from_openai(data: Mapping[str, Any] | None) -> Usage | None:
    """Read a chat-completions ``usage`` object (with its token detail breakdowns)."""
    if not data:
        return None
    completion_details = data.get("completion_tokens_details") or {}
    prompt_details = data.get("prompt_tokens_details") or {}
    prompt = int(data.get("prompt_tokens") or 0)
    completion = int(data.get("completion_tokens") or 0)
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=int(data.get("total_tokens") or (prompt + completion)),
        reasoning_tokens=int(completion_details.get("reasoning_tokens") or 0),
        cached_tokens=int(prompt_details.get("cached_tokens") or 0),
    )


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def _reasoning_of(source: Mapping[str, Any]) -> str | None:
    value = source.get("reasoning_content")
    if value is None:
        value = source.get("reasoning")
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Mapping):  # some gateways nest it as {"content"|"text": ...}
        inner = value.get("content") or value.get("text")
        return inner if isinstance(inner, str) else None
    return None


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def _status_error(status: int, body: Any, *, first_token: bool) -> ProviderError:
    """An HTTP error answer; ``body`` as the SDK gives it (the ``error`` object when there is one)."""
    detail = ""
    if isinstance(body, Mapping):
        err = body.get("error", body)
        detail = str(err.get("message", "")) if isinstance(err, Mapping) else str(err)
    elif body is not None:
        detail = str(body)
    retriable = status in _RETRY_STATUSES or status >= 500
    hint = {401: " (check the API key)", 403: " (the key lacks access)",
            404: " (check the base URL and the model name)",
            429: " (rate limited)"}.get(status, "")
    message = f"model endpoint answered HTTP {status}{hint}" + (f": {detail}" if detail else "")
    return ProviderError(message, status=status, body=body, retriable=retriable,
                         code=f"http_{status}", before_first_token=first_token)


def _error_body(text: str) -> Any:
    """An error answer's body as the SDK decodes it: its JSON's ``error`` object (or the whole
    JSON, or the text when it is not JSON; ``None`` when empty)."""
    text = text.strip()
    try:
        body = json.loads(text)
    except ValueError:
        return text or None
    return body.get("error", body) if isinstance(body, Mapping) else body


def _transport_error(exc: BaseException, url: str, *, first_token: bool) -> ProviderError:
    if isinstance(exc, TransportFailure):
        if exc.timeout:
            return ProviderError(f"model endpoint {url} timed out", retriable=True, code="timeout",
                                 before_first_token=first_token)
    elif isinstance(exc, openai.APITimeoutError | httpx2.TimeoutException):
        return ProviderError(f"model endpoint {url} timed out", retriable=True, code="timeout",
                             before_first_token=first_token)
    return ProviderError(f"connection to model endpoint {url} failed: {exc}", retriable=True,
                         code="connection", before_first_token=first_token)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    try:
        if "retry-after-ms" in headers:
            return float(headers["retry-after-ms"]) / 1000.0
        if "retry-after" in headers:
            return float(headers["retry-after"])
    except ValueError:
        return None
    return None


def _rejects_stream_options(error: ProviderError) -> bool:
    if error.status not in (400, 422):
        return False
    text = json.dumps(error.body, default=str).lower() if error.body is not None else str(error).lower()
    return "stream_options" in text or "include_usage" in text


class _Attempt(Exception):
    """Internal: one failed attempt, with the delay the endpoint asked for."""

    def __init__(self, error: ProviderError, wait: float | None) -> None:
        self.error = error
        self.wait = wait


class OpenAIProvider(ModelProvider):
    """A chat-completions endpoint (OpenAI, Ollama, vLLM, LM Studio, OpenRouter...).

    ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``; a local
    endpoint needs no key. Requests go out through one aiohttp connection pool without a
    connection cap, so many concurrent threads are never queued behind the client.
    ``max_retries`` bounds the retries of a request that failed before its first token. A
    caller-supplied ``http_client`` (httpx2) is used through the SDK instead, as the only
    pool, and left open. ``pool_shards`` is kept for callers that pass it; one aiohttp pool
    needs no sharding (its bookkeeping does not grow with its size).
    """

    name = "openai"

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        max_retries: int = 2,
        headers: Mapping[str, str] | None = None,
        http_client: httpx2.AsyncClient | Any | None = None,
        pool_shards: int = _POOL_SHARDS,
    ) -> None:
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if not is_local_url(self.base_url):
                raise ProviderError(
                    f"no API key for {self.base_url}: set OPENAI_API_KEY, or name the variable holding it with api_key_env in define_model",
                    code="missing_api_key", retriable=False)
            key = _PLACEHOLDER_KEY
        self.timeout = timeout
        self.max_retries = max(0, int(max_retries))
        self._owns_http = http_client is None
        self.client = openai.AsyncOpenAI(
            api_key=key, base_url=self.base_url, timeout=timeout, max_retries=0,
            default_headers=dict(headers) if headers else None,
            http_client=self._new_http_client(timeout) if http_client is None else http_client)
        # the SDK's own headers, its key's first, as the SDK merges them for a request
        sent = {**self.client.auth_headers, **self.client.default_headers}
        self._http = HTTPClient(sent, timeout) if http_client is None else None
        self._url = f"{str(self.client.base_url).rstrip('/')}/chat/completions"
        self._stream_usage = True

    @staticmethod
    def _new_http_client(timeout: float) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            verify=ssl_context(),
            limits=httpx2.Limits(max_connections=None, max_keepalive_connections=_KEEPALIVE,
                                 keepalive_expiry=30.0),
            timeout=httpx2.Timeout(timeout, connect=min(timeout, 10.0)),
            follow_redirects=True,
        )

    # -- request body ----------------------------------------------------------------------
    def _body(self, request: ModelRequest, stream: bool) -> dict[str, Any]:
        # Anthropic's thinking blocks ride on assistant messages for that provider only
        messages = [{k: v for k, v in m.items() if k != "thinking_blocks"} if "thinking_blocks" in m else m
                    for m in request.messages]
        body: dict[str, Any] = {"model": request.model, "messages": messages}
        if request.tools:
            body["tools"] = request.tools
        if request.tool_choice is not None:
            body["tool_choice"] = request.tool_choice
        if request.tools and request.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = request.parallel_tool_calls
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.stop:
            body["stop"] = request.stop
        if request.response_format is not None:
            body["response_format"] = request.response_format
        if stream:
            body["stream"] = True
            if self._stream_usage:
                body["stream_options"] = {"include_usage": True}
        if request.extra_body:
            body.update(request.extra_body)
        return body

    async def _post(self, body: dict[str, Any], request: ModelRequest, stream: bool) -> HTTPReply | SDKReply:
        """One attempt: the response with a status below 400, its body unread; an
        :class:`_Attempt` otherwise."""
        content = _encode(body)
        traced = trace_headers()
        if self._http is None:
            return await self._post_through_sdk(content, request.timeout, traced, stream)
        try:
            reply = await self._http.post(self._url, content, read_timeout=request.timeout, headers=traced)
        except TransportFailure as failure:
            raise _Attempt(_transport_error(failure, self.base_url, first_token=True), None) from failure
        if reply.status < 400:
            return reply
        try:
            text = await reply.text()
        except TransportFailure as failure:
            raise _Attempt(_transport_error(failure, self.base_url, first_token=True), None) from failure
        finally:
            await reply.aclose()
        raise _Attempt(_status_error(reply.status, _error_body(text), first_token=True),
                       _retry_after(reply.headers))

    async def _post_through_sdk(self, content: bytes, read_timeout: float | None, traced: dict[str, str],
                                stream: bool) -> SDKReply:
        options: dict[str, Any] = {}
        if read_timeout is not None:
            options["timeout"] = read_timeout
        if traced:
            options["headers"] = traced
        try:
            response: httpx2.Response = await self.client.post(
                "/chat/completions", cast_to=httpx2.Response, content=content,
                options=options, stream=stream)  # type: ignore[call-overload]
        except openai.APIStatusError as exc:
            raise _Attempt(_status_error(exc.status_code, exc.body, first_token=True),
                           _retry_after(exc.response.headers)) from exc
        except openai.APIConnectionError as exc:
            raise _Attempt(_transport_error(exc, self.base_url, first_token=True), None) from exc
        return SDKReply(response)

    def _backoff(self, attempt: int, asked: float | None) -> float:
        if asked is not None and asked >= 0:
            return min(asked, _RETRY_AFTER_CAP)
        return min(_BACKOFF_CAP, _BACKOFF_BASE * (2 ** attempt)) * (0.75 + random.random() / 2)

    # -- whole replies ---------------------------------------------------------------------
    async def request(self, request: ModelRequest) -> ModelResponse:
        body = self._body(request, stream=False)
        attempt = 0
        while True:
            try:
                reply = await self._post(body, request, stream=False)
                try:
                    content = await reply.read()
                except TransportFailure as failure:
                    raise _Attempt(_transport_error(failure, self.base_url, first_token=True), None) from failure
                finally:
                    await reply.aclose()
                return self._parse_completion(content)
            except _Attempt as failed:
                error = failed.error
                if not error.retriable or attempt >= self.max_retries:
                    error.retry_after = failed.wait
                    raise error from failed.__cause__
                await asyncio.sleep(self._backoff(attempt, failed.wait))
                attempt += 1

    def _parse_completion(self, content: bytes) -> ModelResponse:
        try:
            data = _decode(content)
        except ValueError as exc:
            raise _Attempt(ProviderError(
                f"model endpoint {self.base_url} returned a body that is not JSON",
                body=content.decode(errors="replace")[:2000], code="invalid_response"), None) from exc
        if not isinstance(data, dict):
            raise _Attempt(ProviderError("model endpoint returned an unexpected body",
                                         body=data, code="invalid_response"), None)
        if data.get("error"):
            raise _Attempt(self._body_error(data["error"], first_token=True), None)
        choices = data.get("choices") or []
        if not choices:
            raise _Attempt(ProviderError("model endpoint returned no choices", body=data,
                                         code="invalid_response"), None)
        choice = choices[0]
        message = choice.get("message") or {}
        calls = [
            ToolCall(id=str(tc.get("id") or _new_call_id()),
                     name=str((tc.get("function") or {}).get("name") or ""),
                     arguments=str((tc.get("function") or {}).get("arguments") or "{}"))
            for tc in message.get("tool_calls") or ()
        ]
        return ModelResponse(
            text=_text_of(message.get("content")),
            tool_calls=calls,
            reasoning=_reasoning_of(message),
            usage=usage_from_openai(data.get("usage")),
            finish_reason=choice.get("finish_reason"),
            model=data.get("model"),
            raw=data,
        )

    def _body_error(self, error: Any, *, first_token: bool) -> ProviderError:
        """An ``{"error": ...}`` object sent with status 200 (in a body or an SSE chunk)."""
        code = error.get("code") if isinstance(error, Mapping) else None
        message = error.get("message") if isinstance(error, Mapping) else str(error)
        status = code if isinstance(code, int) else None
        retriable = status is None or status in _RETRY_STATUSES or status >= 500
        return ProviderError(f"model endpoint reported an error: {message}", status=status,
                             body=error, retriable=retriable, code="stream_error",
                             before_first_token=first_token)

    # -- streaming -------------------------------------------------------------------------
    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta]:
        attempt = 0
        retried_usage = False
        while True:
            state = _StreamState()
            try:
                body = self._body(request, stream=True)
                response = await self._post(body, request, stream=True)
                try:
                    async for delta in self._read_stream(response, state):
                        yield delta
                finally:
                    await response.aclose()
                break
            except _Attempt as failed:
                error = failed.error
                if (not retried_usage and self._stream_usage and state.delivered == 0
                        and _rejects_stream_options(error)):
                    self._stream_usage = False
                    retried_usage = True
                    continue
                if not error.retriable or state.delivered or attempt >= self.max_retries:
                    error.retry_after = failed.wait
                    raise error from failed.__cause__
                await asyncio.sleep(self._backoff(attempt, failed.wait))
                attempt += 1
        yield StreamEnd(state.response())

    async def _read_stream(self, response: HTTPReply | SDKReply, state: _StreamState) -> AsyncIterator[StreamDelta]:
        buffer = b""
        done = False
        chunks = response.aiter_bytes()
        try:
            async for raw in chunks:
                buffer += raw
                while True:
                    cut = buffer.find(b"\n")
                    if cut < 0:
                        break
                    line = buffer[:cut].rstrip(b"\r")
                    buffer = buffer[cut + 1:]
                    if not line.startswith(b"data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == b"[DONE]":
                        done = True
                        break
                    if not payload:
                        continue
                    try:
                        chunk = _decode(payload)
                    except ValueError as exc:
                        raise _Attempt(ProviderError(
                            "model endpoint sent a stream chunk that is not JSON",
                            body=payload[:2000].decode(errors="replace"), code="invalid_response",
                            before_first_token=state.delivered == 0), None) from exc
                    for delta in state.feed(chunk, self):
                        state.delivered += 1
                        yield delta
                if done:
                    break
        except TransportFailure as exc:
            raise _Attempt(_transport_error(exc, self.base_url, first_token=state.delivered == 0),
                           None) from exc
        if done:
            await drain(chunks, (TransportFailure,))
        if not done and not state.finish_reason and not state.any_chunk:
            raise _Attempt(ProviderError(
                f"model endpoint {self.base_url} closed the stream before sending anything",
                retriable=True, code="connection", before_first_token=state.delivered == 0), None)

    async def aclose(self) -> None:
        """Close the connection pool (unless the caller supplied its own HTTP client)."""
        if self._http is not None:
            await self._http.aclose()
        if self._owns_http:
            await self.client.close()


class _StreamState:
    """What one streamed reply has assembled so far."""

    __slots__ = ("any_chunk", "calls", "delivered", "finish_reason", "model", "reasoning",
                 "text", "usage")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, list[Any]] = {}  # index -> [id, name, [argument pieces]]
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.model: str | None = None
        self.delivered = 0
        self.any_chunk = False

    def feed(self, chunk: Mapping[str, Any], provider: OpenAIProvider) -> list[StreamDelta]:
        self.any_chunk = True
        if chunk.get("error"):
            raise _Attempt(provider._body_error(chunk["error"], first_token=self.delivered == 0), None)
        if self.model is None:
            self.model = chunk.get("model")
        usage = chunk.get("usage")
        if usage:
            self.usage = usage_from_openai(usage)
        out: list[StreamDelta] = []
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            reasoning = _reasoning_of(delta)
            if reasoning:
                self.reasoning.append(reasoning)
                out.append(ReasoningDelta(reasoning))
            content = delta.get("content")
            if content:
                text = content if isinstance(content, str) else _text_of(content)
                self.text.append(text)
                out.append(TextDelta(text))
            for piece in delta.get("tool_calls") or ():
                out.append(self._tool_piece(piece))
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return out

    def _tool_piece(self, piece: Mapping[str, Any]) -> ToolCallDelta:
        index = piece.get("index")
        call_id = piece.get("id")
        if not isinstance(index, int):  # endpoints that omit the index: a new id starts a call
            index = len(self.calls) if call_id or not self.calls else max(self.calls)
        fn = piece.get("function") or {}
        entry = self.calls.get(index)
        new_id = new_name = None
        if entry is None:
            entry = self.calls[index] = [None, None, []]
        if call_id and entry[0] is None:
            entry[0] = new_id = str(call_id)
        name = fn.get("name")
        if name and entry[1] is None:
            entry[1] = new_name = str(name)
        args = fn.get("arguments") or ""
        if args:
            entry[2].append(args)
        return ToolCallDelta(index=index, id=new_id, name=new_name, arguments=args)

    def response(self) -> ModelResponse:
        calls = [
            ToolCall(id=entry[0] or _new_call_id(), name=entry[1] or "",
                     arguments="".join(entry[2]) or "{}")
            for _, entry in sorted(self.calls.items())
        ]
        return ModelResponse(
            text="".join(self.text),
            tool_calls=calls,
            reasoning="".join(self.reasoning) or None,
            usage=self.usage,
            finish_reason=self.finish_reason,
            model=self.model,
        )
