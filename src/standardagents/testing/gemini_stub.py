"""A real HTTP server speaking Google's Gemini API (``generateContent``), for tests of the
Gemini provider.

Tests drive :mod:`standardagents.providers.gemini` through the real ``google-genai`` SDK
against this server on 127.0.0.1 (the SDK's ``base_url`` option points at it), so what is
exercised is the actual wire format: ``models/{model}:generateContent`` replies,
``:streamGenerateContent?alt=sse`` chunks (text split across chunks, a function call whole
in one, usage on the last), ``usageMetadata``, thought parts and signatures, and Google's
error bodies (``{"error": {"code", "message", "status"}}``), also mid-stream.

Use it as ``with GeminiStub() as stub:`` (or ``async with``) and give ``stub.base_url`` to
the client. Unless built with ``strict=False`` it refuses what the real API refuses: a
request without an API key, a role other than ``user``/``model``, an empty part, a function
call turn not answered by as many function responses, a function declaration with a bad
name, and a function call it issued with a thought signature coming back without it. The
API accepts proto field names in camelCase or snake_case (the SDK sends some of each); so
does the stub.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from ._server import ScriptedServer, read_body

__all__ = ["STATUS_NAMES", "GeminiReply", "GeminiStub", "normalize_request", "validate_generate_request"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: the ``error.status`` Google sends with each HTTP status
STATUS_NAMES: dict[int, str] = {
    400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
    409: "ABORTED", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}

_ROUTE = re.compile(r"^/(v1beta|v1|v1alpha)/models/([^/:]+):(generateContent|streamGenerateContent)$")
_FUNCTION_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.\-]{0,63}$")
_PART_FIELDS = ("text", "inlineData", "fileData", "functionCall", "functionResponse", "executableCode",
                "codeExecutionResult")
#: keys whose values are the caller's own data (arguments, results, JSON schemas): kept verbatim
_OPAQUE = frozenset({"args", "response", "parameters", "parametersJsonSchema", "responseSchema",
                     "responseJsonSchema", "labels"})


@dataclass
class GeminiReply:
    """One scripted reply of the stub.

    ``tool_calls`` are ``(name, args_json)`` pairs, sent as ``functionCall`` parts (with an
    ``id`` unless ``call_ids`` is false, and the first with a ``thoughtSignature``).
    ``thought`` opens the reply with a thought part when the request asked for thoughts.
    ``parts`` are raw parts added after the text (inline images, executed code and its
    result), ``grounding`` the candidate's ``groundingMetadata``. ``error_status`` answers
    with that status and a Google error body; ``stream_error_after`` sends an error chunk
    after that many chunks of a stream.
    """

    text: str | None = None
    tool_calls: list[tuple[str, str]] = field(default_factory=list)
    thought: str | None = None
    parts: list[dict[str, Any]] = field(default_factory=list)
    grounding: dict[str, Any] | None = None
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    chunk_size: int = 4
    call_ids: bool = True
    error_status: int | None = None
    error_message: str | None = None
    stream_error_after: int | None = None
    stream_error_status: int = 503


ReplyLike = GeminiReply | str
Responder = Callable[[dict[str, Any]], ReplyLike]


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def normalize_request(value: Any, *, opaque: bool = False) -> Any:
    """``value`` with every field name in camelCase, leaving the caller's own data as sent."""
    if opaque:
        return value
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            name = _camel(key) if isinstance(key, str) else key
            out[name] = normalize_request(item, opaque=name in _OPAQUE)
        return out
    if isinstance(value, list):
        return [normalize_request(v) for v in value]
    return value


def _signature_bytes(value: Any) -> bytes | None:
    """A signature's bytes, from base64 in either alphabet (the API accepts both)."""
    if not isinstance(value, str):
        return None
    text = value.replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except ValueError:
        return None


def _call_key(call: dict[str, Any]) -> str:
    return json.dumps([call.get("name"), call.get("args") or {}], sort_keys=True, separators=(",", ":"))


def _part_problems(part: Any, role: str, where: str) -> list[str]:
    if not isinstance(part, dict):
        return [f"{where}: a part is an object"]
    data = [name for name in _PART_FIELDS if name in part]
    if not data:
        return [f"{where}: required oneof field 'data' must have one initialized field"]
    if len(data) > 1:
        return [f"{where}: oneof field 'data' is already set. Cannot set '{data[1]}'"]
    kind = data[0]
    if kind == "text" and not isinstance(part["text"], str):
        return [f"{where}.text: a string"]
    if kind == "functionCall":
        call = part["functionCall"]
        if role != "model":
            return [f"{where}: function calls belong to model turns"]
        if not isinstance(call, dict) or not call.get("name"):
            return [f"{where}.function_call.name: Name cannot be empty."]
    if kind == "functionResponse":
        answer = part["functionResponse"]
        if role != "user":
            return [f"{where}: function responses belong to user turns"]
        if not isinstance(answer, dict) or not answer.get("name"):
            return [f"{where}.function_response.name: Name cannot be empty."]
        if not isinstance(answer.get("response"), dict):
            return [f"{where}.function_response.response: a JSON object"]
    return []


def validate_generate_request(body: dict[str, Any]) -> list[str]:
    """What the real API would refuse in a (normalized) ``generateContent`` body."""
    problems: list[str] = []
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return ["contents is not specified"]
    pending = 0
    for i, content in enumerate(contents):
        where = f"contents[{i}]"
        role = content.get("role", "user") if isinstance(content, dict) else None
        if role not in ("user", "model"):
            problems.append(f"{where}.role: Please use a valid role: user, model.")
            continue
        parts = content.get("parts")
        if not isinstance(parts, list) or not parts:
            problems.append(f"{where}.parts: contents.parts must not be empty.")
            continue
        for j, part in enumerate(parts):
            problems.extend(_part_problems(part, role, f"{where}.parts[{j}]"))
        answers = sum(1 for p in parts if isinstance(p, dict) and "functionResponse" in p)
        if pending and answers != pending:
            problems.append("Please ensure that the number of function response parts is equal to the number of "
                            "function call parts of the function call turn.")
        pending = sum(1 for p in parts if isinstance(p, dict) and "functionCall" in p) if role == "model" else 0
    for i, tool in enumerate(body.get("tools") or []):
        for j, declaration in enumerate((tool or {}).get("functionDeclarations") or []):
            name = declaration.get("name") if isinstance(declaration, dict) else None
            if not isinstance(name, str) or not _FUNCTION_NAME.match(name):
                problems.append(f"tools[{i}].function_declarations[{j}].name: Invalid function name. Must start with "
                                "a letter or an underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), "
                                "dots (.) or dashes (-), with a maximum length of 64.")
    return problems


def _as_reply(item: ReplyLike) -> GeminiReply:
    return GeminiReply(text=item) if isinstance(item, str) else item


def _pieces(text: str, size: int) -> Iterator[str]:
    size = max(1, size)
    for start in range(0, len(text), size):
        yield text[start:start + size]


def _error(status: int, message: str | None) -> dict[str, Any]:
    name = STATUS_NAMES.get(status, "UNKNOWN")
    return {"error": {"code": status, "message": message or f"stub {name.lower()} ({status})", "status": name}}


class _Reply:
    """Builds the wire objects of one reply."""

    def __init__(self, stub: GeminiStub, body: dict[str, Any], reply: GeminiReply, model: str, serial: int) -> None:
        self.stub = stub
        self.body = body
        self.reply = reply
        self.model = model
        self.serial = serial
        thinking = (body.get("generationConfig") or {}).get("thinkingConfig") or {}
        self.thoughts = bool(thinking.get("includeThoughts")) and reply.thought is not None

    def finish_reason(self) -> str:
        return self.reply.finish_reason or "STOP"

    def usage(self) -> dict[str, int]:
        if self.reply.usage is not None:
            return dict(self.reply.usage)
        sent = [self.body.get("systemInstruction"), self.body.get("contents"), self.body.get("tools")]
        produced = len(self.reply.text or "") + sum(len(n) + len(a) for n, a in self.reply.tool_calls)
        prompt = len(json.dumps(sent, separators=(",", ":"))) // 4
        out = {"promptTokenCount": prompt, "candidatesTokenCount": max(1, produced // 4)}
        thoughts = len(self.reply.thought or "") // 4 if self.thoughts else 0
        if thoughts:
            out["thoughtsTokenCount"] = thoughts
        out["totalTokenCount"] = prompt + out["candidatesTokenCount"] + thoughts
        return out

    def calls(self) -> list[dict[str, Any]]:
        parts = []
        for index, (name, args) in enumerate(self.reply.tool_calls):
            call: dict[str, Any] = {"name": name, "args": json.loads(args or "{}")}
            if self.reply.call_ids:
                call["id"] = f"gcall_{self.serial}_{index}"
            part: dict[str, Any] = {"functionCall": call}
            if index == 0:
                part["thoughtSignature"] = self.stub.signature_for(call)
            parts.append(part)
        return parts

    def parts(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if self.thoughts:
            out.append({"text": self.reply.thought, "thought": True})
        if self.reply.text is not None:
            out.append({"text": self.reply.text})
        out.extend(self.reply.parts)
        out.extend(self.calls())
        return out

    def _candidate(self, parts: list[dict[str, Any]], finish: bool) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish:
            candidate["finishReason"] = self.finish_reason()
            if self.reply.grounding is not None:
                candidate["groundingMetadata"] = self.reply.grounding
        return candidate

    def _shell(self, candidate: dict[str, Any], usage: dict[str, int]) -> dict[str, Any]:
        return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": self.model,
                "responseId": f"resp_stub{self.serial}"}

    def whole(self) -> dict[str, Any]:
        return self._shell(self._candidate(self.parts(), True), self.usage())

    def chunks(self) -> Iterator[dict[str, Any]]:
        usage = self.usage()
        prompt_only = {"promptTokenCount": usage.get("promptTokenCount", 0)}
        size = self.reply.chunk_size
        if self.thoughts and self.reply.thought:
            for piece in _pieces(self.reply.thought, size):
                yield self._shell(self._candidate([{"text": piece, "thought": True}], False), prompt_only)
        if self.reply.text:
            for piece in _pieces(self.reply.text, size):
                yield self._shell(self._candidate([{"text": piece}], False), prompt_only)
        last = [*self.reply.parts, *self.calls()]
        yield self._shell(self._candidate(last or [{"text": ""}], True), usage)


_JSON_HEADERS = [(b"content-type", b"application/json; charset=UTF-8")]
_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


class GeminiStub(ScriptedServer[GeminiReply]):
    """A Gemini API server on 127.0.0.1 answering from a queue, a responder or ``"ok"``.

    Every received body (normalized to camelCase field names) is appended to
    :attr:`requests` with its headers in :attr:`headers`, and its URL path and query in
    :attr:`paths`, before the reply is chosen. ``api_key`` (when given) is the only key
    accepted; without it any key is.
    """

    label = "Gemini stub"

    def __init__(self, responder: Responder | None = None, *, port: int = 0, host: str = "127.0.0.1",
                 strict: bool = True, api_key: str | None = None) -> None:
        super().__init__(responder, host=host, port=port)
        self.strict = strict
        self.api_key = api_key
        self.paths: list[str] = []
        #: signatures issued with function calls, by the call's name and arguments
        self._issued: dict[str, str] = {}

    @property
    def base_url(self) -> str:
        """The root URL to give the SDK (it adds ``/v1beta/models/...``)."""
        return f"http://{self.host}:{self.port}"

    def signature_for(self, call: dict[str, Any]) -> str:
        key = _call_key(call)
        signature = base64.b64encode(b"stub-sig:" + hashlib.sha256(key.encode()).digest()[:12]).decode()
        self._issued[key] = signature
        return signature

    def _coerce(self, item: Any) -> GeminiReply:
        return _as_reply(item)

    def _default_reply(self) -> GeminiReply:
        return GeminiReply(text="ok")

    def _signature_problems(self, body: dict[str, Any]) -> list[str]:
        problems = []
        for i, content in enumerate(body.get("contents") or []):
            if not isinstance(content, dict) or content.get("role") != "model":
                continue
            for j, part in enumerate(content.get("parts") or []):
                call = part.get("functionCall") if isinstance(part, dict) else None
                if not isinstance(call, dict):
                    continue
                expected = self._issued.get(_call_key(call))
                if expected is not None and _signature_bytes(part.get("thoughtSignature")) != _signature_bytes(expected):
                    problems.append(f"Function call is missing a thought_signature in functionCall parts. This is "
                                    f"required for tools to work correctly, and missing thought_signature may lead "
                                    f"to degraded model performance. Additional data, function call `default_api:"
                                    f"{call.get('name')}` , position {j + 1}. (contents[{i}])")
        return problems

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"]
        route = _ROUTE.match(path)
        if method != "POST" or route is None:
            await self._send_json(send, 404, _error(404, f"no route {method} {path}"))
            return
        raw = await read_body(receive)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
        key = headers.get("x-goog-api-key")
        if self.strict and not key:
            await self._send_json(send, 403, _error(403, "Method doesn't allow unregistered callers (callers without "
                                                         "established identity). Please use API Key or other form of "
                                                         "API consumer identity to call this API."))
            return
        if self.api_key is not None and key != self.api_key:
            await self._send_json(send, 400, _error(400, "API key not valid. Please pass a valid API key."))
            return
        try:
            parsed = json.loads(raw or b"{}")
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            await self._send_json(send, 400, _error(400, "Invalid JSON payload received."))
            return
        body = normalize_request(parsed)
        query = scope.get("query_string", b"").decode("latin-1")
        self.paths.append(path + (f"?{query}" if query else ""))
        serial = self._record(body, headers)
        problems = [*validate_generate_request(body), *self._signature_problems(body)] if self.strict else []
        if problems:
            await self._send_json(send, 400, _error(400, "; ".join(problems)))
            return
        stream = route.group(3) == "streamGenerateContent"
        await self._reply(body, route.group(2), serial, stream, send)

    @staticmethod
    async def _send_json(send: Send, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        headers = [*_JSON_HEADERS, (b"content-length", str(len(data)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    async def _reply(self, body: dict[str, Any], model: str, serial: int, stream: bool, send: Send) -> None:
        reply = self._next_reply(body)
        if reply.error_status is not None:
            await self._send_json(send, reply.error_status, _error(reply.error_status, reply.error_message))
            return
        built = _Reply(self, body, reply, model, serial)
        if not stream:
            await self._send_json(send, 200, built.whole())
            return
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        for sent, chunk in enumerate(built.chunks()):
            if reply.stream_error_after is not None and sent >= reply.stream_error_after:
                chunk = _error(reply.stream_error_status, reply.error_message)
            frame = b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\r\n\r\n"
            await send({"type": "http.response.body", "body": frame, "more_body": True})
            if "error" in chunk:
                break
        await send({"type": "http.response.body", "body": b"", "more_body": False})

