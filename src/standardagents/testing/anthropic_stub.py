"""A real HTTP server speaking Anthropic's Messages API, for tests of the Anthropic provider.

Tests drive :class:`~standardagents.providers.anthropic.AnthropicProvider` through the real
``anthropic`` SDK against this server on 127.0.0.1, so what is exercised is the actual wire
format (named SSE events, tool input JSON split across deltas, thinking blocks, usage in
``message_start`` and ``message_delta``, Anthropic's error bodies and retry headers).

Use it as ``with AnthropicStub() as stub:`` (or ``async with``) and give ``stub.base_url`` to
the client; it listens on a free port and serves from a background thread. Unless built with
``strict=False`` it answers a request the real API would refuse (no ``max_tokens``, a
``system`` turn in ``messages``, a ``tool_use`` without its ``tool_result``, a tool without
``input_schema``) with a 400 in Anthropic's shape, so a malformed request cannot pass a test.

Extended thinking is checked the way the API checks it: the stub signs every thinking block it
sends (and remembers its redacted blocks), and refuses a request carrying a thinking block
whose text or signature changed, a redacted block whose data changed, or, with ``thinking``
enabled, an unfinished tool loop whose last assistant turn no longer opens with its thinking.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import math
import secrets
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from ._server import ScriptedServer, read_json

__all__ = ["ERROR_TYPES", "AnthropicReply", "AnthropicStub", "thinking_problems", "validate_messages_request"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: the ``error.type`` Anthropic sends with each HTTP status
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
    500: "api_error", 529: "overloaded_error",
}


@dataclass
class AnthropicReply:
    """One scripted reply of the stub.

    ``tool_calls`` are ``(name, input_json)`` pairs; streamed, each input arrives split across
    several ``input_json_delta`` events. ``error_status`` answers with that status and an
    Anthropic error body (``error_type``/``error_message``, or ``error_body`` verbatim);
    ``retry_after_ms`` adds the header the SDK honours before retrying. ``stream_error_after``
    sends an ``error`` event (``stream_error_type``) after that many events of a stream;
    ``drop_after_events`` closes the connection instead. ``thinking`` opens the reply with a
    thinking block signed by the stub (or by ``signature`` when given); each entry of
    ``redacted_thinking`` adds a ``redacted_thinking`` block with that ``data`` after it.
    """

    text: str | None = None
    tool_calls: list[tuple[str, str]] = field(default_factory=list)
    thinking: str | None = None
    signature: str | None = None
    redacted_thinking: list[str] = field(default_factory=list)
    stop_reason: str | None = None
    usage: dict[str, int] | None = None
    delay: float = 0.0
    chunk_size: int = 4
    error_status: int | None = None
    error_type: str | None = None
    error_message: str | None = None
    error_body: Any = None
    retry_after_ms: int | None = None
    stream_error_after: int | None = None
    stream_error_type: str = "overloaded_error"
    drop_after_events: int | None = None


ReplyLike = AnthropicReply | str
Responder = Callable[[dict[str, Any]], ReplyLike]


class _DropConnection(Exception):
    """Raised inside the ASGI app so that uvicorn aborts the connection."""


def _as_reply(item: ReplyLike) -> AnthropicReply:
    return AnthropicReply(text=item) if isinstance(item, str) else item


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _split(text: str, size: int) -> Iterator[str]:
    size = max(1, size)
    for start in range(0, len(text), size):
        yield text[start:start + size]


def _json_pieces(text: str, size: int) -> list[str]:
    """At least three pieces whenever the text allows, so assembly across deltas is exercised."""
    if len(text) <= 1:
        return [text] if text else []
    return list(_split(text, min(size, math.ceil(len(text) / 3))))


def _error_payload(status: int, kind: str | None, message: str | None, serial: int) -> dict[str, Any]:
    kind = kind or ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message or f"stub {kind} ({status})"},
            "request_id": f"req_stub{serial}"}


def _block_problems(role: str, blocks: list[Any], where: str) -> list[str]:
    problems = []
    for j, block in enumerate(blocks):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind is None:
            problems.append(f"{where}.content.{j}: a content block needs a type")
        elif kind == "tool_use" and role != "assistant":
            problems.append(f"{where}.content.{j}: tool_use blocks belong to assistant turns")
        elif kind == "tool_result" and role != "user":
            problems.append(f"{where}.content.{j}: tool_result blocks belong to user turns")
        elif kind == "tool_use" and not isinstance(block.get("input"), dict):
            problems.append(f"{where}.content.{j}.input: must be an object")
    return problems


def validate_messages_request(body: dict[str, Any]) -> list[str]:
    """What the real Messages API would refuse in ``body`` (an empty list when nothing)."""
    problems: list[str] = []
    if not isinstance(body.get("model"), str) or not body["model"]:
        problems.append("model: Field required")
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        problems.append("max_tokens: Field required (a positive integer)")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*problems, "messages: at least one message is required"]
    pending: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        where = f"messages.{i}"
        if role not in ("user", "assistant"):
            problems.append(f"{where}.role: Input should be 'user' or 'assistant' (system text "
                            "goes in the top-level system parameter)")
            continue
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            problems.append(f"{where}.content: a string or a list of blocks")
            continue
        problems.extend(_block_problems(role, blocks, where))
        results = {str(b.get("tool_use_id")) for b in blocks
                   if isinstance(b, dict) and b.get("type") == "tool_result"}
        if pending - results:
            problems.append(f"{where}: tool_use ids were found without tool_result blocks "
                            f"immediately after: {', '.join(sorted(pending - results))}")
        pending = {str(b.get("id")) for b in blocks
                   if role == "assistant" and isinstance(b, dict) and b.get("type") == "tool_use"}
    first = messages[0]
    if isinstance(first, dict) and first.get("role") == "assistant":
        problems.append("messages.0.role: the first message must use the user role")
    for i, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, dict) or not tool.get("name"):
            problems.append(f"tools.{i}.name: Field required")
        elif "type" not in tool and not isinstance(tool.get("input_schema"), dict):
            problems.append(f"tools.{i}.input_schema: Field required")
    return problems


_THINKING_KINDS = ("thinking", "redacted_thinking")
# The API's own wording (its spelling included), so clients see what production would say.
_THINKING_FIRST = (
    "When `thinking` is enabled, a final `assistant` message must start with a thinking block "
    "(preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include "
    "thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult "
    "our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking")


def _kinds(content: Any) -> list[Any]:
    if isinstance(content, str):
        return ["text"]
    return [b.get("type") if isinstance(b, dict) else None for b in content] if isinstance(content, list) else []


def thinking_problems(body: dict[str, Any], genuine: Callable[[dict[str, Any]], bool]) -> list[str]:
    """What the real API refuses about the thinking blocks ``body`` carries back.

    ``genuine(block)`` tells whether a ``thinking`` block (text and signature) or a
    ``redacted_thinking`` block (data) is one the server sent, unchanged."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return []
    problems: list[str] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        kinds = _kinds(message.get("content"))
        if any(k in _THINKING_KINDS for k in kinds) and kinds[0] not in _THINKING_KINDS:
            problems.append(f"messages.{i}.content.0: If an assistant message contains any thinking blocks, "
                            f"the first block must be `thinking` or `redacted_thinking`. Found `{kinds[0]}`.")
        for j, kind in enumerate(kinds):
            block = message["content"][j] if kind in _THINKING_KINDS else None
            if block is None or genuine(block):
                continue
            field_name = "signature" if kind == "thinking" else "data"
            problems.append(f"messages.{i}.content.{j}: Invalid `{field_name}` in `{kind}` block")
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive") and len(messages) >= 2:
        last, turn = messages[-1], messages[-2]
        continues_tools = isinstance(last, dict) and last.get("role") == "user" and "tool_result" in _kinds(last.get("content"))
        if continues_tools and isinstance(turn, dict) and turn.get("role") == "assistant":
            kinds = _kinds(turn.get("content"))
            if kinds and kinds[0] not in _THINKING_KINDS:
                problems.append(f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or "
                                f"`redacted_thinking`, but found `{kinds[0]}`. {_THINKING_FIRST}")
    return problems


class _Message:
    """Builds the wire objects of one reply (one message id, tool ids numbered by serial)."""

    __slots__ = ("body", "id", "model", "reply", "serial")

    def __init__(self, body: dict[str, Any], reply: AnthropicReply, serial: int) -> None:
        self.body = body
        self.reply = reply
        self.serial = serial
        self.id = f"msg_stub{serial}"
        self.model = str(body.get("model") or "claude-stub")

    def stop_reason(self) -> str:
        if self.reply.stop_reason:
            return self.reply.stop_reason
        return "tool_use" if self.reply.tool_calls else "end_turn"

    def usage(self) -> dict[str, int]:
        if self.reply.usage is not None:
            return dict(self.reply.usage)
        sent = [self.body.get("system"), self.body.get("messages"), self.body.get("tools")]
        produced = len(self.reply.text or "") + len(self.reply.thinking or "")
        produced += sum(len(name) + len(args) for name, args in self.reply.tool_calls)
        return {"input_tokens": len(json.dumps(sent, separators=(",", ":"))) // 4,
                "output_tokens": max(1, produced // 4),
                "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}

    def tool_id(self, index: int) -> str:
        return f"toolu_stub{self.serial}_{index}"

    def _shell(self, content: list[dict[str, Any]], stop: str | None,
               usage: dict[str, int]) -> dict[str, Any]:
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model,
                "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage}

    def blocks(self) -> list[dict[str, Any]]:
        """The complete content blocks, in the order the API emits them."""
        reply = self.reply
        out: list[dict[str, Any]] = []
        if reply.thinking is not None:
            out.append({"type": "thinking", "thinking": reply.thinking, "signature": reply.signature or ""})
        out.extend({"type": "redacted_thinking", "data": data} for data in reply.redacted_thinking)
        if reply.text is not None:
            out.append({"type": "text", "text": reply.text})
        for index, (name, args) in enumerate(reply.tool_calls):
            out.append({"type": "tool_use", "id": self.tool_id(index), "name": name,
                        "input": json.loads(args or "{}")})
        return out

    def message(self) -> dict[str, Any]:
        return self._shell(self.blocks(), self.stop_reason(), self.usage())

    def events(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(event name, data)`` pairs of the streamed reply, as the API sends them."""
        usage = self.usage()
        size = self.reply.chunk_size
        start_usage = {**usage, "output_tokens": 1}
        yield "message_start", {"type": "message_start",
                                "message": self._shell([], None, start_usage)}
        yield "ping", {"type": "ping"}
        for index, block in enumerate(self.blocks()):
            kind = block["type"]
            if kind == "thinking":
                head: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
                deltas = [{"type": "thinking_delta", "thinking": p}
                          for p in _split(block["thinking"], size)]
                deltas.append({"type": "signature_delta", "signature": block["signature"]})
            elif kind == "redacted_thinking":
                head, deltas = block, []  # sent whole in its start event, as the API does
            elif kind == "text":
                head = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": p} for p in _split(block["text"], size)]
            else:
                head = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                raw = self.reply.tool_calls[index - self._first_tool_block()][1]
                deltas = [{"type": "input_json_delta", "partial_json": p}
                          for p in _json_pieces(raw, size)]
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": head}
            for delta in deltas:
                yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": delta}
            yield "content_block_stop", {"type": "content_block_stop", "index": index}
        yield "message_delta", {"type": "message_delta",
                                "delta": {"stop_reason": self.stop_reason(), "stop_sequence": None},
                                "usage": {"output_tokens": usage.get("output_tokens", 0)}}
        yield "message_stop", {"type": "message_stop"}

    def _first_tool_block(self) -> int:
        return (int(self.reply.thinking is not None) + len(self.reply.redacted_thinking)
                + int(self.reply.text is not None))


_JSON_HEADERS = [(b"content-type", b"application/json")]
_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


class AnthropicStub(ScriptedServer[AnthropicReply]):
    """A Messages API server on 127.0.0.1 answering from a queue, a responder or ``"ok"``.

    Every received JSON body is appended to :attr:`requests` (and its headers to
    :attr:`headers`) before the reply is chosen, so a test can assert what the client sent.
    """

    label = "Anthropic stub"

    def __init__(self, responder: Responder | None = None, *, port: int = 0,
                 host: str = "127.0.0.1", strict: bool = True) -> None:
        super().__init__(responder, host=host, port=port)
        self.strict = strict
        self._secret = secrets.token_bytes(32)
        #: the thinking blocks sent so far, as (type, text or data, signature)
        self._issued: set[tuple[str, str, str]] = set()

    def signature_for(self, thinking: str) -> str:
        """The signature this stub gives a thinking block with this text."""
        digest = hmac.new(self._secret, thinking.encode(), hashlib.sha256).digest()
        return base64.b64encode(b"stub-thinking:" + digest).decode()

    def _genuine(self, block: dict[str, Any]) -> bool:
        if block.get("type") == "thinking":
            key = ("thinking", block.get("thinking"), block.get("signature"))
        else:
            key = ("redacted_thinking", block.get("data"), "")
        return all(isinstance(part, str) for part in key) and key in self._issued

    # -- scripting -------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """The root URL to give an Anthropic client (the SDK adds ``/v1/messages``)."""
        return f"http://{self.host}:{self.port}"

    def _coerce(self, item: Any) -> AnthropicReply:
        return _as_reply(item)

    def _default_reply(self) -> AnthropicReply:
        return AnthropicReply(text="ok")

    # -- ASGI ------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"].rstrip("/")
        if method != "POST" or path != "/v1/messages":
            await self._send_json(send, 404, _error_payload(
                404, None, f"no route {method} {scope['path']}", 0))
            return
        body = await read_json(receive)
        if not isinstance(body, dict):
            await self._send_json(send, 400, _error_payload(400, None, "the body is not a JSON object", 0))
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
        serial = self._record(body, headers)
        problems = [*validate_messages_request(body), *thinking_problems(body, self._genuine)] if self.strict else []
        if problems:
            await self._send_json(send, 400, _error_payload(400, None, "; ".join(problems), serial))
            return
        await self._reply(body, serial, send)

    @staticmethod
    async def _send_json(send: Send, status: int, payload: Any,
                         extra: list[tuple[bytes, bytes]] | None = None) -> None:
        data = _dumps(payload)
        headers = [*_JSON_HEADERS, (b"content-length", str(len(data)).encode()), *(extra or [])]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    async def _reply(self, body: dict[str, Any], serial: int, send: Send) -> None:
        reply = self._next_reply(body)
        await self._pause(reply.delay)
        request_id = [(b"request-id", f"req_stub{serial}".encode())]
        if reply.error_status is not None:
            payload = reply.error_body if reply.error_body is not None else _error_payload(
                reply.error_status, reply.error_type, reply.error_message, serial)
            if reply.retry_after_ms is not None:
                request_id.append((b"retry-after-ms", str(reply.retry_after_ms).encode()))
            await self._send_json(send, reply.error_status, payload, request_id)
            return
        if reply.thinking is not None and reply.signature is None:
            reply = dataclasses.replace(reply, signature=self.signature_for(reply.thinking))
        if reply.thinking is not None:
            self._issued.add(("thinking", reply.thinking, reply.signature or ""))
        self._issued.update(("redacted_thinking", data, "") for data in reply.redacted_thinking)
        built = _Message(body, reply, serial)
        if not body.get("stream"):
            await self._send_json(send, 200, built.message(), request_id)
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [*_SSE_HEADERS, *request_id]})
        for sent, (name, data) in enumerate(built.events()):
            if reply.drop_after_events is not None and sent >= reply.drop_after_events:
                raise _DropConnection("dropped on purpose")
            if reply.stream_error_after is not None and sent >= reply.stream_error_after:
                name, data = "error", _error_payload(529, reply.stream_error_type, None, serial)
            frame = f"event: {name}\ndata: ".encode() + _dumps(data) + b"\n\n"
            await send({"type": "http.response.body", "body": frame, "more_body": True})
            if name == "error":
                break
        await send({"type": "http.response.body", "body": b"", "more_body": False})
