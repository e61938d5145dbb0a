"""Anthropic's Messages API behind the same seam as every chat-completions endpoint.

The engine speaks chat-completions shapes; this module converts them to Anthropic's
(system prompt apart, tool results as ``tool_result`` blocks in user turns, tool calls as
``tool_use`` blocks) and converts replies and stream events back. Extended thinking's signed
``thinking`` and ``redacted_thinking`` blocks come back as ``ModelResponse.thinking_blocks``
and go out again, unchanged and first, from an assistant message's ``thinking_blocks``: the
API refuses a tool loop's follow-up without them. The conversions are pure
functions so they are tested without a network. The ``anthropic`` SDK is an optional extra
(``pip install standardagents[anthropic]``) and is imported only when the provider is built.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import random
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx2

from ..exceptions import ProviderError
from ..observability.tracing import trace_headers
from ..records import ToolCall, Usage
from ._http import HTTPClient, HTTPReply, SDKReply, TransportFailure, ssl_context
from ._wire import decode_json, drain, encode_body
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

__all__ = [
    "AnthropicProvider",
    "AnthropicStreamAssembler",
    "from_anthropic_message",
    "to_anthropic_messages",
    "to_anthropic_tool_choice",
    "to_anthropic_tools",
]

DEFAULT_MAX_TOKENS = 4096
_STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
                 "tool_use": "tool_calls", "refusal": "content_filter", "pause_turn": "stop"}


def _image_block(part: Mapping[str, Any]) -> dict[str, Any]:
    image = part.get("image_url")
    url = image.get("url", "") if isinstance(image, Mapping) else str(image or "")
    if url.startswith("data:") and ";base64," in url:
        header, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": header or "image/png",
                                            "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _content_blocks(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, Mapping):
            blocks.append({"type": "text", "text": str(part)})
        elif part.get("type") == "text":
            blocks.append({"type": "text", "text": str(part.get("text", ""))})
        elif part.get("type") == "image_url":
            blocks.append(_image_block(part))
        else:
            blocks.append(dict(part))
    return blocks


def _plain_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in _content_blocks(content) if b.get("type") == "text")


def _parse_arguments(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, Mapping):
        return dict(arguments)
    try:
        value = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return {"_raw": str(arguments)}
    return value if isinstance(value, dict) else {"value": value}


def _thinking_block(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """A thinking block as the API needs it back: exactly its own fields, nothing added."""
    kind = block.get("type")
    if kind == "thinking":
        return {"type": "thinking", "thinking": block.get("thinking", ""), "signature": block.get("signature", "")}
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.get("data", "")}
    return None


def _thinking_blocks(blocks: Any) -> list[dict[str, Any]]:
    out = []
    for block in blocks or ():
        kept = _thinking_block(block) if isinstance(block, Mapping) else None
        if kept is not None:
            out.append(kept)
    return out


def to_anthropic_messages(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """Split chat-completions messages into Anthropic's ``system`` text and alternating turns.

    Consecutive turns of the same role are merged (tool results become ``tool_result``
    blocks in a user turn), because the Messages API expects user and assistant to alternate.
    """
    system_parts: list[str] = []
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for message in messages:
        role = message.get("role")
        if role in ("system", "developer"):
            text = _plain_text(message.get("content"))
            if text:
                system_parts.append(text)
        elif role == "user":
            add("user", _content_blocks(message.get("content")))
        elif role == "assistant":
            blocks = _thinking_blocks(message.get("thinking_blocks"))
            blocks.extend(_content_blocks(message.get("content")))
            for call in message.get("tool_calls") or ():
                fn = call.get("function") or {}
                blocks.append({"type": "tool_use", "id": str(call.get("id", "")),
                               "name": str(fn.get("name", "")),
                               "input": _parse_arguments(fn.get("arguments"))})
            add("assistant", blocks)
        elif role == "tool":
            result: dict[str, Any] = {"type": "tool_result",
                                      "tool_use_id": str(message.get("tool_call_id", "")),
                                      "content": _plain_text(message.get("content"))}
            if message.get("is_error") or message.get("tool_status") == "error":
                result["is_error"] = True
            add("user", [result])
    return ("\n\n".join(system_parts) or None), turns


def to_anthropic_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat-completions function tools as Anthropic tool definitions."""
    out = []
    for tool in tools:
        fn = tool.get("function") or tool
        entry: dict[str, Any] = {"name": str(fn.get("name", "")),
                                 "input_schema": fn.get("parameters") or {"type": "object",
                                                                         "properties": {}}}
        if fn.get("description"):
            entry["description"] = str(fn["description"])
        out.append(entry)
    return out


def to_anthropic_tool_choice(choice: str | dict[str, Any] | None) -> dict[str, Any] | None:
    """``auto``/``required``/``none`` or a named function, in Anthropic's terms."""
    if choice is None:
        return None
    if isinstance(choice, str):
        return {"auto": {"type": "auto"}, "required": {"type": "any"},
                "any": {"type": "any"}, "none": {"type": "none"}}.get(choice, {"type": "auto"})
    fn = choice.get("function") or {}
    name = fn.get("name") or choice.get("name")
    return {"type": "tool", "name": str(name)} if name else {"type": "auto"}


def _usage(data: Mapping[str, Any] | None, base: Usage | None = None) -> Usage | None:
    if not data and base is None:
        return None
    data = data or {}
    prompt = int(data.get("input_tokens") or 0) + int(data.get("cache_read_input_tokens") or 0)
    prompt += int(data.get("cache_creation_input_tokens") or 0)
    if base is not None and not prompt:
        prompt = base.prompt_tokens
    completion = int(data.get("output_tokens") or 0)
    if base is not None and not completion:
        completion = base.completion_tokens
    cached = int(data.get("cache_read_input_tokens") or 0) or (base.cached_tokens if base else 0)
    written = int(data.get("cache_creation_input_tokens") or 0) or (base.cache_write_tokens if base else 0)
    return Usage(prompt_tokens=prompt, completion_tokens=completion,
                 total_tokens=prompt + completion, cached_tokens=cached, cache_write_tokens=written)


def from_anthropic_message(data: Mapping[str, Any]) -> ModelResponse:
    """An Anthropic ``message`` object as a :class:`ModelResponse`."""
    text: list[str] = []
    thinking: list[str] = []
    kept: list[dict[str, Any]] = []
    calls: list[ToolCall] = []
    for block in data.get("content") or ():
        kind = block.get("type")
        if kind == "text":
            text.append(str(block.get("text", "")))
        elif kind in ("thinking", "redacted_thinking"):
            if kind == "thinking":
                thinking.append(str(block.get("thinking", "")))
            found = _thinking_block(block)
            if found is not None:
                kept.append(found)
        elif kind == "tool_use":
            calls.append(ToolCall(id=str(block.get("id", "")), name=str(block.get("name", "")),
                                  arguments=json.dumps(block.get("input") or {})))
    stop = data.get("stop_reason")
    return ModelResponse(
        text="".join(text), tool_calls=calls, reasoning="".join(thinking) or None,
        usage=_usage(data.get("usage")),
        finish_reason=_STOP_REASONS.get(stop, stop) if stop else None,
        model=data.get("model"), raw=dict(data), thinking_blocks=kept,
    )


class AnthropicStreamAssembler:
    """Turns Anthropic stream events (as dicts) into deltas and the final response."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.thinking: list[str] = []
        self.calls: dict[int, list[Any]] = {}  # block index -> [tool index, id, name, [json]]
        self.kept: dict[int, dict[str, Any]] = {}  # block index -> thinking block being assembled
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self.model: str | None = None
        #: whether a delta has been handed on (a failure after it cannot be retried unseen)
        self.delivered = False

    def feed(self, event: Mapping[str, Any]) -> list[StreamDelta]:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.model = message.get("model")
            self.usage = _usage(message.get("usage"))
            return []
        if kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") == "tool_use":
                position = len(self.calls)
                entry: list[Any] = [position, str(block.get("id", "")), str(block.get("name", "")), []]
                self.calls[int(event.get("index", position))] = entry
                return [ToolCallDelta(index=position, id=entry[1], name=entry[2])]
            if block.get("type") == "text" and block.get("text"):
                self.text.append(block["text"])
                return [TextDelta(block["text"])]
            opened = _thinking_block(block)
            if opened is not None:
                self.kept[int(event.get("index", len(self.kept)))] = opened
                if opened["type"] == "thinking" and opened["thinking"]:
                    self.thinking.append(opened["thinking"])
                    return [ReasoningDelta(opened["thinking"])]
            return []
        if kind == "content_block_delta":
            delta = event.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta" and delta.get("text"):
                self.text.append(delta["text"])
                return [TextDelta(delta["text"])]
            if dtype == "thinking_delta" and delta.get("thinking"):
                self.thinking.append(delta["thinking"])
                block = self.kept.get(int(event.get("index", -1)))
                if block is not None:
                    block["thinking"] += delta["thinking"]
                return [ReasoningDelta(delta["thinking"])]
            if dtype == "signature_delta":
                block = self.kept.get(int(event.get("index", -1)))
                if block is not None:
                    block["signature"] += str(delta.get("signature") or "")
                return []
            if dtype == "input_json_delta":
                found = self.calls.get(int(event.get("index", -1)))
                piece = str(delta.get("partial_json") or "")
                if found is not None and piece:
                    found[3].append(piece)
                    return [ToolCallDelta(index=found[0], arguments=piece)]
            return []
        if kind == "message_delta":
            stop = (event.get("delta") or {}).get("stop_reason")
            if stop:
                self.finish_reason = _STOP_REASONS.get(stop, stop)
            self.usage = _usage(event.get("usage"), self.usage)
            return []
        if kind == "error":
            error = event.get("error") or {}
            raise ProviderError(f"Anthropic stream error: {error.get('message', error)}",
                                body=error, retriable=error.get("type") in ("overloaded_error", "api_error"),
                                code="stream_error", before_first_token=False)
        return []

    def response(self) -> ModelResponse:
        calls = [ToolCall(id=e[1], name=e[2], arguments="".join(e[3]) or "{}")
                 for e in sorted(self.calls.values(), key=lambda e: e[0])]
        return ModelResponse(text="".join(self.text), tool_calls=calls,
                             reasoning="".join(self.thinking) or None, usage=self.usage,
                             finish_reason=self.finish_reason, model=self.model,
                             thinking_blocks=[self.kept[i] for i in sorted(self.kept)])


#: the HTTP status Anthropic uses for each error type, for errors that arrive mid-stream
_STREAM_ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401,
                        "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
                        "rate_limit_error": 429, "api_error": 500, "overloaded_error": 529}


def _error_detail(body: Any, fallback: str) -> tuple[str | None, str]:
    """The ``error.type`` and ``error.message`` of an Anthropic error body, when it has them."""
    error = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(error, Mapping) and error.get("message"):
        kind = error.get("type")
        return (str(kind) if kind else None), str(error["message"])
    return None, fallback


_INITIAL_RETRY_DELAY = 0.5
_MAX_RETRY_DELAY = 8.0


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the endpoint asked to wait (``retry-after-ms``, or ``retry-after`` in seconds or
    as a date), read as the SDK reads them."""
    try:
        return float(headers.get("retry-after-ms", "")) / 1000
    except ValueError:
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(value)
    return None if parsed is None else float(email.utils.mktime_tz(parsed) - time.time())


def _retry_delay(retried: int, headers: Mapping[str, str] | None) -> float:
    """The SDK's wait before another attempt: what the endpoint asked, or a jittered backoff."""
    asked = _retry_after(headers) if headers is not None else None
    if asked is not None and asked > 0:
        return min(asked, 4_294_967.0)
    return min(_INITIAL_RETRY_DELAY * 2.0 ** min(retried, 1000), _MAX_RETRY_DELAY) * (1 - 0.25 * random.random())


def _should_retry(status: int, headers: Mapping[str, str]) -> bool:
    verdict = headers.get("x-should-retry")
    if verdict in ("true", "false"):
        return verdict == "true"
    return status in (408, 409, 429) or status >= 500


def _status_error(status: int, body: Any, message: str, first_token: bool) -> ProviderError:
    kind, detail = _error_detail(body, message)
    named = f" {kind}" if kind else ""
    return ProviderError(f"Anthropic answered HTTP {status}{named}: {detail}", status=status,
                         body=body, retriable=status in (408, 409, 429) or status >= 500,
                         code=f"http_{status}", before_first_token=first_token)


def _transport_error(failure: TransportFailure, first_token: bool) -> ProviderError:
    if failure.timeout:
        return ProviderError("Anthropic request timed out", retriable=True, code="timeout",
                             before_first_token=first_token)
    return ProviderError(f"connection to Anthropic failed: {failure}", retriable=True,
                         code="connection", before_first_token=first_token)


class AnthropicProvider(ModelProvider):
    """Claude models through the Messages API (``ANTHROPIC_API_KEY`` when no key is given).

    The ``anthropic`` SDK's client (``provider.client``) supplies the headers (key, API
    version, user agent) and the base URL; requests go out as prepared JSON through
    aiohttp (:mod:`._http`), and replies are read as plain JSON, one orjson parse per stream
    event and no SDK object per delta, because the SDK's typed objects and httpx2's
    pure-Python parsing were most of a call's client-side CPU. Retries are the SDK's: failed
    connections and 408/409/429/5xx answers (or as ``x-should-retry`` says), before any token,
    up to ``max_retries`` times, after the wait the endpoint asked for or a jittered backoff.
    A caller-supplied ``http_client`` (httpx2) is used through the SDK instead, and left open.
    """

    name = "anthropic"

    def __init__(self, base_url: str | None = None, api_key: str | None = None, *,
                 timeout: float = 60.0, max_retries: int = 2,
                 headers: Mapping[str, str] | None = None, http_client: Any = None) -> None:
        try:
            import anthropic
        except ImportError as exc:
            raise ProviderError(
                "the Anthropic provider needs the anthropic package: "
                "pip install 'standardagents[anthropic]'", code="missing_dependency") from exc
        self._sdk = anthropic
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise ProviderError("no API key for Anthropic: set ANTHROPIC_API_KEY, or name the variable holding it with api_key_env in define_model",
                                code="missing_api_key")
        kwargs: dict[str, Any] = {"api_key": key, "timeout": timeout, "max_retries": max_retries}
        if base_url:
            kwargs["base_url"] = base_url
        if headers:
            kwargs["default_headers"] = dict(headers)
        kwargs["http_client"] = http_client if http_client is not None else httpx2.AsyncClient(verify=ssl_context())
        self.client = anthropic.AsyncAnthropic(**kwargs)
        self.max_retries = max(0, int(max_retries))
        self._http = HTTPClient(self.client.default_headers, timeout) if http_client is None else None
        self._url = f"{str(self.client.base_url).rstrip('/')}/v1/messages"

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages API body for ``request`` (without ``stream``)."""
        system, messages = to_anthropic_messages(request.messages)
        params: dict[str, Any] = {"model": request.model, "messages": messages,
                                  "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS}
        if system:
            params["system"] = system
        if request.tools:
            params["tools"] = to_anthropic_tools(request.tools)
            choice = to_anthropic_tool_choice(request.tool_choice)
            if request.parallel_tool_calls is False and (choice is None or choice["type"] != "none"):
                choice = {**(choice or {"type": "auto"}), "disable_parallel_tool_use": True}
            if choice is not None:
                params["tool_choice"] = choice
        if request.stop:
            params["stop_sequences"] = request.stop
        # Sampling options go in the body as the endpoint (not the SDK) accepts or refuses them.
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.top_p is not None:
            params["top_p"] = request.top_p
        params.update(request.extra_body)
        return params

    async def _post(self, request: ModelRequest, stream: bool) -> HTTPReply | SDKReply:
        """Send the request (retrying as the SDK would) and hand back the response with a
        status below 400, its body still unread; a :class:`ProviderError` otherwise."""
        body = self._params(request)
        if stream:
            body["stream"] = True
        content = encode_body(body)
        traced = trace_headers()
        if self._http is None:
            return await self._post_through_sdk(content, request.timeout, traced, stream)
        retried = 0
        while True:
            try:
                reply = await self._http.post(self._url, content, read_timeout=request.timeout, headers=traced)
            except TransportFailure as failure:
                if retried >= self.max_retries:
                    raise _transport_error(failure, True) from failure
                await asyncio.sleep(_retry_delay(retried, None))
                retried += 1
                continue
            if reply.status < 400:
                return reply
            try:
                text = (await reply.text()).strip()
            except TransportFailure as failure:
                raise _transport_error(failure, True) from failure
            finally:
                await reply.aclose()
            if retried < self.max_retries and _should_retry(reply.status, reply.headers):
                await asyncio.sleep(_retry_delay(retried, reply.headers))
                retried += 1
                continue
            raise _status_error(reply.status, *_error_body(text, reply.status), True)

    async def _post_through_sdk(self, content: bytes, read_timeout: float | None, traced: dict[str, str],
                                stream: bool) -> SDKReply:
        options: dict[str, Any] = {}
        if read_timeout is not None:
            options["timeout"] = read_timeout
        if traced:
            options["headers"] = traced
        sdk = self._sdk
        try:
            response: httpx2.Response = await self.client.post(
                "/v1/messages", cast_to=httpx2.Response, content=content,
                options=options, stream=stream)  # type: ignore[call-overload]
        except sdk.APIStatusError as exc:
            raise _status_error(exc.status_code, exc.body, exc.message, True) from exc
        except sdk.APIConnectionError as exc:  # and APITimeoutError, a subclass
            raise _transport_error(TransportFailure(str(exc), timeout=isinstance(exc, sdk.APITimeoutError)),
                                   True) from exc
        return SDKReply(response)

    async def request(self, request: ModelRequest) -> ModelResponse:
        reply = await self._post(request, stream=False)
        try:
            content = await reply.read()
        except TransportFailure as failure:
            raise _transport_error(failure, True) from failure
        finally:
            await reply.aclose()
        try:
            data = decode_json(content)
        except ValueError as exc:
            raise ProviderError("Anthropic returned a body that is not JSON",
                                body=content[:2000].decode(errors="replace"), code="invalid_response") from exc
        if not isinstance(data, dict):
            raise ProviderError("Anthropic returned an unexpected body", body=data,
                                code="invalid_response")
        return from_anthropic_message(data)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta]:
        assembler = AnthropicStreamAssembler()
        reply = await self._post(request, stream=True)
        try:
            async for delta in self._read_stream(reply, assembler):
                yield delta
        except TransportFailure as failure:
            raise _transport_error(failure, not assembler.delivered) from failure
        finally:  # also when the consumer stops early: give the connection back
            await reply.aclose()
        yield StreamEnd(assembler.response())

    async def _read_stream(self, reply: HTTPReply | SDKReply,
                           assembler: AnthropicStreamAssembler) -> AsyncIterator[StreamDelta]:
        """Server-sent events, split by hand at their blank lines: an event's ``data`` lines
        are joined and parsed once, events without a name and ``ping`` are skipped (as the SDK
        skips them), an ``error`` event fails the stream, and after ``message_stop`` the rest
        of the body is drained so the connection is kept."""
        chunks = reply.aiter_bytes()
        buffer = b""
        async for raw in chunks:
            buffer += raw
            if b"\r" in buffer:  # CRLF line ends (a CR split from its LF is joined next time)
                buffer = buffer.replace(b"\r\n", b"\n")
            while True:
                cut = buffer.find(b"\n\n")
                if cut < 0:
                    break
                block = buffer[:cut]
                buffer = buffer[cut + 2:]
                name, payload = _sse_event(block)
                if name == b"error":
                    raise _stream_error(payload, not assembler.delivered)
                if name is None or name == b"ping" or not payload:
                    continue
                try:
                    parsed = decode_json(payload)
                except ValueError as exc:
                    raise ProviderError("Anthropic sent a stream event that is not JSON",
                                        body=payload[:2000].decode(errors="replace"),
                                        code="invalid_response",
                                        before_first_token=not assembler.delivered) from exc
                for delta in assembler.feed(parsed):
                    assembler.delivered = True
                    yield delta
                if name == b"message_stop":
                    await drain(chunks, (TransportFailure,))
                    return

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
        await self.client.close()


def _sse_event(block: bytes) -> tuple[bytes | None, bytes]:
    """An event's name and its ``data`` lines joined (empty when it has none); comments and
    other fields are ignored."""
    name: bytes | None = None
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if line.startswith(b"data:"):
            data.append(line[6:] if line[5:6] == b" " else line[5:])
        elif line.startswith(b"event:"):
            name = line[6:].strip() or None
    if not data:
        return name, b""
    return name, data[0] if len(data) == 1 else b"\n".join(data)


def _error_body(text: str, status: int) -> tuple[Any, str]:
    """An error answer's body (its JSON, or its text) and the SDK's message for it."""
    try:
        body = json.loads(text)
    except ValueError:
        return text, text or f"Error code: {status}"
    return body, f"Error code: {status} - {body}"


def _stream_error(payload: bytes, first_token: bool) -> ProviderError:
    """An ``error`` event inside a stream that began with HTTP 200, with the status its
    ``error.type`` stands for."""
    body: Any
    try:
        body = decode_json(payload)
        fallback = f"{body}"
    except ValueError:
        body = payload.decode(errors="replace")
        fallback = body or "Error code: 200"
    kind, detail = _error_detail(body, fallback)
    status = _STREAM_ERROR_STATUS.get(kind or "", 500)
    return ProviderError(f"Anthropic stream failed with {kind or 'an error'}: {detail}",
                         status=status, body=body,
                         retriable=status in (408, 409, 429) or status >= 500,
                         code="stream_error", before_first_token=first_token)
