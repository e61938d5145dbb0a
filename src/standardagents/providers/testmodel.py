"""An offline, deterministic model for tests: calls every offered tool, then summarises.

Asked for structured output (``response_format`` json_schema), its final answer is a JSON
value built from the schema, so typed agents run offline too.

It needs no network and no key, so agents can be tested end to end in milliseconds. By
default it exercises every tool once with arguments generated from the tool's JSON Schema;
a ``script`` replaces that with exact replies when a test needs a particular conversation.

It follows its instructions only as far as they can be read without understanding them: a
text reply quotes the first sentence of the system prompt (so each side of a debate shows the
stance it was given), and a tool the system prompt names in backticks ("call `conclude`
when...") is a closing move, made only once the model has replied at least once, with the
tool's own defaults.

It obeys ``tool_choice`` the way an endpoint must: ``none`` makes no tool call, ``required``
at least one (the closing tools too, and again after results), and a named tool only that
tool.
"""

from __future__ import annotations

import collections
import json
import re
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from ..records import ToolCall, Usage
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

__all__ = ["ScriptItem", "TestModelProvider", "arguments_for_schema", "value_for_schema"]

ScriptItem = ModelResponse | str | dict[str, Any] | BaseException
Script = Sequence[ScriptItem] | Callable[[ModelRequest], ScriptItem]

_SUMMARY_LIMIT = 80
_DELTA_SIZE = 8


def _string_for(name: str, schema: dict[str, Any]) -> str:
    fmt = schema.get("format")
    if fmt == "date-time":
        value = "2024-01-01T00:00:00Z"
    elif fmt == "date":
        value = "2024-01-01"
    elif fmt == "email":
        value = "user@example.com"
    elif fmt in ("uri", "url"):
        value = "https://example.com"
    elif fmt == "uuid":
        value = "00000000-0000-4000-8000-000000000000"
    else:
        value = name or str(schema.get("description") or "text")
        value = "_".join(value.split())[:32] or "text"
    min_len = int(schema.get("minLength", 0))
    max_len = schema.get("maxLength")
    if len(value) < min_len:
        value = value + "x" * (min_len - len(value))
    if max_len is not None:
        value = value[: int(max_len)]
    return value


def _number_for(schema: dict[str, Any], integer: bool) -> int | float:
    low = schema.get("minimum")
    if low is None and "exclusiveMinimum" in schema:
        excl = schema["exclusiveMinimum"]
        low = excl + 1 if integer else excl + 0.5
    high = schema.get("maximum")
    if high is None and "exclusiveMaximum" in schema:
        excl = schema["exclusiveMaximum"]
        high = excl - 1 if integer else excl - 0.5
    value: float = 1
    if low is not None and value < low:
        value = low
    if high is not None and value > high:
        value = high
    multiple = schema.get("multipleOf")
    if multiple:
        value = multiple * max(1, round(value / multiple)) if value > 0 else multiple * round(value / multiple)
    return int(value) if integer else float(value)


def _value_for(name: str, schema: dict[str, Any], defs: dict[str, Any], depth: int) -> Any:
    if depth > 8:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        key = ref.rsplit("/", 1)[-1]
        return _value_for(name, defs.get(key, {}), defs, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for combo in ("anyOf", "oneOf"):
        options = schema.get(combo)
        if options:
            non_null = [o for o in options if o.get("type") != "null"] or options
            return _value_for(name, non_null[0], defs, depth + 1)
    if schema.get("allOf"):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            merged.update(part)
        return _value_for(name, merged, defs, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    if kind == "string":
        return _string_for(name, schema)
    if kind == "integer":
        return _number_for(schema, integer=True)
    if kind == "number":
        return _number_for(schema, integer=False)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    if kind == "array":
        items = schema.get("items") or {}
        count = max(1, int(schema.get("minItems", 1)))
        if schema.get("maxItems") is not None:
            count = min(count, int(schema["maxItems"]))
        item_name = name[:-1] if name.endswith("s") else name
        values = [_value_for(item_name, items, defs, depth + 1) for _ in range(count)]
        if schema.get("uniqueItems") and count > 1:
            values = [f"{v}{i}" if isinstance(v, str) else v for i, v in enumerate(values)]
        return values
    return _object_for(schema, defs, depth + 1)


def _object_for(schema: dict[str, Any], defs: dict[str, Any], depth: int) -> dict[str, Any]:
    props: dict[str, Any] = schema.get("properties") or {}
    required = schema.get("required")
    names = list(required) if required is not None else list(props)
    return {key: _value_for(key, props.get(key, {}), defs, depth) for key in names}


def arguments_for_schema(schema: dict[str, Any], hint: str | None = None) -> dict[str, Any]:
    """Arguments that validate against a tool's parameter schema (required properties only).

    With ``hint`` (the user's last message), the first free-text argument carries it, so an
    offline demo passes the user's words to its tools."""
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    args = _object_for(schema, defs, 0)
    if hint:
        props: dict[str, Any] = schema.get("properties") or {}
        for key in args:
            prop = props.get(key) or {}
            if prop.get("type") == "string" and not ({"enum", "const", "format", "pattern"} & set(prop)):
                limit = prop.get("maxLength")
                text = hint if limit is None else hint[: int(limit)]
                if len(text) >= int(prop.get("minLength", 0)):
                    args[key] = text
                break
    return args


def value_for_schema(schema: dict[str, Any]) -> Any:
    """A value that validates against ``schema`` (all of an object's required properties),
    built the way tool arguments are: the typed answer of the offline model."""
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    return _value_for("result", schema, defs, 0)


def _structured_schema(request: ModelRequest) -> dict[str, Any] | None:
    """The JSON Schema a request's ``response_format`` asks the answer to follow."""
    fmt = request.response_format
    if not fmt or fmt.get("type") != "json_schema":
        return None
    schema = (fmt.get("json_schema") or {}).get("schema")
    return schema if isinstance(schema, dict) else None


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


def _request_chars(request: ModelRequest) -> int:
    total = 0
    for message in request.messages:
        content = message.get("content")
        if isinstance(content, str):
            total += len(content)
        elif content is not None:
            total += len(json.dumps(content, default=str))
        for call in message.get("tool_calls") or []:
            fn = call.get("function") or {}
            total += len(str(fn.get("name", ""))) + len(str(fn.get("arguments", "")))
    for tool in request.tools:
        total += len(json.dumps(tool, default=str))
    return total


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _truncate(text: str, limit: int = _SUMMARY_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


_REPLY_PREFIX = "Test reply to: "
_OWN_REPLY = re.compile(r"^Test reply to: (?P<text>.*?)(?: \(as instructed: .*\))?$", re.S)


def _instruction(request: ModelRequest) -> str:
    """The first sentence of the system prompt (empty without one)."""
    system = next((m for m in request.messages if m.get("role") == "system"), None)
    text = " ".join(_content_text(system.get("content")).split()) if system else ""
    match = re.match(r".+?[.!?](?=\s|$)", text)
    return match.group(0) if match else text


def _closing_tools(request: ModelRequest) -> set[str]:
    """Tools the system prompt names in backticks: moves to make later, not at once."""
    system = " ".join(_content_text(m.get("content")) for m in request.messages if m.get("role") == "system")
    return set(re.findall(r"`([A-Za-z0-9_:/.-]+)`", system))


def _forced_choice(request: ModelRequest) -> str | None:
    """``none``, ``required``, or the name of the one tool to call (None: the model decides).

    Both wire shapes of a named tool are read: chat completions' ``{"type": "function",
    "function": {"name": ...}}`` and the flat ``{"type": "function", "name": ...}``."""
    choice = request.tool_choice
    if isinstance(choice, dict):
        named = choice.get("function")
        name = named.get("name") if isinstance(named, dict) else choice.get("name")
        return f"tool:{name}" if isinstance(name, str) and name else None
    return choice if choice in ("none", "required") else None


def _has_replied(request: ModelRequest) -> bool:
    return any(m.get("role") == "assistant" and _content_text(m.get("content")) for m in request.messages)


class TestModelProvider(ModelProvider):
    """A model that answers without a network, the same way every time.

    ``requests`` records every :class:`ModelRequest` received. Give ``script`` (a list, or a
    callable of the request) to dictate replies; a list that runs out raises
    :class:`~standardagents.exceptions.ProviderError` so a test sees the surprise.
    """

    __test__ = False  # not a pytest test class, despite the name
    name = "test"

    def __init__(self, script: Script | None = None, *, model_name: str = "test-model") -> None:
        #: the requests received, newest last (the last 1,000: a long-running server that
        #: uses the offline model keeps flat memory)
        self.requests: collections.deque[ModelRequest] = collections.deque(maxlen=1000)
        self.model_name = model_name
        self._script = script
        self._position = 0
        self._calls = 0

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if self._script is None:
            response = self._default_reply(request)
        else:
            response = self._scripted_reply(request)
        if response.usage is None:
            prompt = _estimate_tokens("x" * _request_chars(request))
            produced = len(response.text) + len(response.reasoning or "")
            produced += sum(len(c.name) + len(c.arguments) for c in response.tool_calls)
            completion = _estimate_tokens("x" * produced)
            response.usage = Usage(prompt, completion, prompt + completion)
        if response.model is None:
            response.model = request.model or self.model_name
        if response.finish_reason is None:
            response.finish_reason = "tool_calls" if response.tool_calls else "stop"
        return response

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta]:
        response = await self.request(request)
        if response.reasoning:
            for start in range(0, len(response.reasoning), _DELTA_SIZE):
                yield ReasoningDelta(response.reasoning[start:start + _DELTA_SIZE])
        for start in range(0, len(response.text), _DELTA_SIZE):
            yield TextDelta(response.text[start:start + _DELTA_SIZE])
        for index, call in enumerate(response.tool_calls):
            yield ToolCallDelta(index=index, id=call.id, name=call.name)
            half = len(call.arguments) // 2
            yield ToolCallDelta(index=index, arguments=call.arguments[:half])
            yield ToolCallDelta(index=index, arguments=call.arguments[half:])
        yield StreamEnd(response)

    # -- replies ---------------------------------------------------------------------------
    def _next_id(self) -> str:
        self._calls += 1
        return f"call_{self._calls}"

    def _default_reply(self, request: ModelRequest) -> ModelResponse:
        last_user = -1
        for index, message in enumerate(request.messages):
            if message.get("role") == "user":
                last_user = index
        recent = request.messages[last_user + 1:]
        results = [m for m in recent if m.get("role") == "tool"]
        closing = _closing_tools(request)
        replied = _has_replied(request)
        offered = [tool.get("function") or tool for tool in request.tools]
        due = [fn for fn in offered if str(fn.get("name", "")) not in closing or replied]
        forced = _forced_choice(request)
        if forced == "none":
            due = []
        elif forced == "required":
            due = due or offered
            if not due:
                raise self._refusal("tool_choice 'required' needs at least one tool, and the request offers none")
        elif forced is not None:
            name = forced.removeprefix("tool:")
            due = [fn for fn in offered if fn.get("name") == name]
            if not due:
                raise self._refusal(f"tool_choice names the tool {name!r}, which the request does not offer "
                                    f"(it offers {', '.join(repr(fn.get('name')) for fn in offered) or 'none'})")
        if due and (not results or forced is not None):
            calls = []
            hint = _content_text(request.messages[last_user].get("content")) if last_user >= 0 else None
            for fn in due:
                name = str(fn.get("name", "tool"))
                args = arguments_for_schema(fn.get("parameters") or {}, None if name in closing else hint)
                calls.append(ToolCall(id=self._next_id(), name=name, arguments=json.dumps(args)))
            return ModelResponse(tool_calls=calls)
        if results:
            names: dict[str, str] = {}
            for message in recent:
                for call in message.get("tool_calls") or []:
                    names[str(call.get("id"))] = str((call.get("function") or {}).get("name", ""))
            parts = []
            for result in results:
                name = names.get(str(result.get("tool_call_id")), result.get("name") or "tool")
                parts.append(f"{name} -> {_truncate(_content_text(result.get('content')))}")
            structured = _structured_schema(request)
            if structured is not None:
                return ModelResponse(text=json.dumps(value_for_schema(structured)))
            return ModelResponse(text="Tool results: " + "; ".join(parts))
        structured = _structured_schema(request)
        if structured is not None:
            return ModelResponse(text=json.dumps(value_for_schema(structured)))
        user_text = _content_text(request.messages[last_user].get("content")) if last_user >= 0 else ""
        own = _OWN_REPLY.match(user_text)
        if own:  # answering another offline reply (the other side of a debate): answer its subject
            user_text = own.group("text")
        text = f"{_REPLY_PREFIX}{_truncate(user_text)}" if user_text else "Test reply."
        instruction = _instruction(request)
        return ModelResponse(text=f"{text} (as instructed: {instruction})" if instruction else text)

    @staticmethod
    def _refusal(message: str) -> Exception:
        """What an endpoint answers a ``tool_choice`` it cannot honour: a 400, not retried."""
        from ..exceptions import ProviderError

        return ProviderError(f"test model: {message}", status=400, code="invalid_request", retriable=False)

    def _scripted_reply(self, request: ModelRequest) -> ModelResponse:
        from ..exceptions import ProviderError

        if callable(self._script):
            item = self._script(request)
        else:
            assert self._script is not None
            if self._position >= len(self._script):
                raise ProviderError(
                    f"test model script exhausted after {len(self._script)} replies; "
                    "add more items to the script", code="script_exhausted")
            item = self._script[self._position]
            self._position += 1
        return self._to_response(item)

    def _to_response(self, item: ScriptItem) -> ModelResponse:
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, ModelResponse):
            return ModelResponse(text=item.text, tool_calls=list(item.tool_calls),
                                 reasoning=item.reasoning, usage=item.usage,
                                 finish_reason=item.finish_reason, model=item.model, raw=item.raw)
        if isinstance(item, str):
            return ModelResponse(text=item)
        if isinstance(item, dict):
            calls = []
            for spec in item.get("tool_calls") or []:
                args = spec.get("arguments", {})
                text_args = args if isinstance(args, str) else json.dumps(args)
                calls.append(ToolCall(id=str(spec.get("id") or self._next_id()),
                                      name=str(spec["name"]), arguments=text_args))
            return ModelResponse(text=str(item.get("text") or ""), tool_calls=calls,
                                 reasoning=item.get("reasoning"))
        raise TypeError(f"unsupported test model script item: {item!r}")
