"""An offline, deterministic model for tests and demos: it calls the tools a message is about,
then answers from their results.

Asked for structured output (``response_format`` json_schema), its final answer is a JSON
value built from the schema, so typed agents run offline too.

It needs no network and no key, so agents can be tested end to end in milliseconds. It
chooses the way a sensible model would, by plain word matching (no learning involved): a tool
is called when the last user message shares a word with the tool's name or description
("What time is it?" calls ``current_time``; arithmetic such as "12 * 7" calls a tool about
arithmetic, adding or calculating), a message about none of the tools gets a plain answer,
and a bare go-ahead ("go", "again", "continue") calls every offered tool. Arguments come
from the message where they fit the schema: the arithmetic for an expression parameter, the
message's numbers for number parameters, a timezone-looking token for a timezone, the whole
message for the first free-text parameter without a default; the schema fills in the rest.
After the results it answers in words from them ("12 * 7 = 84"). A ``script`` replaces all
of that with exact replies when a test needs a particular conversation.

It follows its instructions only as far as they can be read without understanding them: a
text reply quotes the first sentence of the system prompt (so each side of a debate shows the
stance it was given), and a tool the system prompt names in backticks ("call `conclude`
when...") is a closing move, made only once the model has replied at least once, with the
tool's own defaults.

It obeys ``tool_choice`` the way an endpoint must: ``none`` makes no tool call, ``required``
at least one (every offered tool, the closing ones too, and again after results), and a named
tool only that tool.
"""

from __future__ import annotations

import ast
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

__all__ = ["ScriptItem", "TestModelProvider", "arguments_for_schema", "arithmetic_in", "tools_about", "value_for_schema"]

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
    """Arguments that validate against a tool's parameter schema (required properties only, or
    every property when the schema lists none as required).

    With ``hint`` (the user's last message), values are drawn from it where they fit: the
    arithmetic in it for an expression parameter, its numbers for number parameters (in order,
    within the schema's bounds), a timezone-looking token for a timezone parameter, and the
    whole message for the first free-text parameter that has no default."""
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    args = _object_for(schema, defs, 0)
    if hint:
        _fill_from_message(args, schema.get("properties") or {}, hint)
    return args


def _free_text(prop: dict[str, Any]) -> bool:
    return prop.get("type") == "string" and not ({"enum", "const", "format", "pattern"} & set(prop))


def _fits_length(text: str, prop: dict[str, Any]) -> bool:
    limit = prop.get("maxLength")
    return len(text) >= int(prop.get("minLength", 0)) and (limit is None or len(text) <= int(limit))


def _fits_number(value: float, prop: dict[str, Any]) -> bool:
    if prop.get("minimum") is not None and value < prop["minimum"]:
        return False
    if prop.get("maximum") is not None and value > prop["maximum"]:
        return False
    if prop.get("exclusiveMinimum") is not None and value <= prop["exclusiveMinimum"]:
        return False
    if prop.get("exclusiveMaximum") is not None and value >= prop["exclusiveMaximum"]:
        return False
    multiple = prop.get("multipleOf")
    return not multiple or float(value / multiple).is_integer()


def _about(key: str, prop: dict[str, Any], words: tuple[str, ...]) -> bool:
    text = f"{key} {prop.get('description') or ''}".lower().replace("_", " ")
    return any(word in text for word in words)


def _fill_from_message(args: dict[str, Any], props: dict[str, Any], message: str) -> None:
    expression = arithmetic_in(message)
    numbers = _NUMBER.findall(_symbolic(message))
    timezone = _TIMEZONE.search(message)
    whole_given = False
    for key in args:
        prop = props.get(key) or {}
        kind = prop.get("type")
        if kind in ("integer", "number"):
            while numbers:
                token = numbers.pop(0)
                value: float = float(token)
                if kind == "integer" and not value.is_integer():
                    continue
                if _fits_number(value, prop):
                    args[key] = int(value) if kind == "integer" else value
                    break
            continue
        if not _free_text(prop):
            continue
        if _about(key, prop, ("expression", "arithmetic", "formula", "calculation", "equation", "math")):
            if expression and _fits_length(expression, prop):
                args[key] = expression
            continue
        if _about(key, prop, ("timezone", "time zone", "tz")):
            if timezone and _fits_length(timezone.group(0), prop):
                args[key] = timezone.group(0)
            continue
        if not whole_given and "default" not in prop:
            whole_given = True
            text = message if prop.get("maxLength") is None else message[: int(prop["maxLength"])]
            if len(text) >= int(prop.get("minLength", 0)):
                args[key] = text


# -- reading a message: its arithmetic, numbers, timezone and what it is about -------------------

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.]*[A-Za-z])")
_OPERAND = r"[-(]*\s*\d+(?:\.\d+)?\s*\)*"
_EXPRESSION = re.compile(rf"{_OPERAND}(?:\s*(?:\*\*|[-+*/%])\s*{_OPERAND})+")
_WORD_OPERATORS = (
    (re.compile(r"(?<=\d)\s*(?:[x×]|times|multiplied\s+by)\s*(?=[-(]?\s*\d)", re.I), " * "),
    (re.compile(r"(?<=\d)\s*(?:÷|divided\s+by|over)\s*(?=[-(]?\s*\d)", re.I), " / "),
    (re.compile(r"(?<=\d)\s+plus\s+(?=[-(]?\s*\d)", re.I), " + "),
    (re.compile(r"(?<=\d)\s+minus\s+(?=[-(]?\s*\d)", re.I), " - "),
    (re.compile(r"(?<=\d)\s*\^\s*(?=[-(]?\s*\d)"), " ** "),
)
_TIMEZONE = re.compile(
    r"\b(?:[A-Z][a-z]+(?:_[A-Z][a-z]+)*/[A-Z][A-Za-z_]+(?:/[A-Z][A-Za-z_]+)?"
    r"|(?:UTC|GMT)(?:[+-]\d{1,2}(?::?\d{2})?)?"
    r"|[ECMP][SD]T|CES?T|BST|IST|JST|AEST|AEDT)\b")


def _symbolic(text: str) -> str:
    """``text`` with operator words and signs ("times", "x", "÷", "^") written as Python's."""
    for pattern, operator in _WORD_OPERATORS:
        text = pattern.sub(operator, text)
    return text


def _balanced(span: str) -> str:
    """``span`` without the parentheses it does not close or open."""
    span = span.strip()
    while span.startswith("(") and span.count("(") > span.count(")"):
        span = span[1:].lstrip()
    while span.endswith(")") and span.count(")") > span.count("("):
        span = span[:-1].rstrip()
    return span


def arithmetic_in(text: str) -> str | None:
    """The arithmetic expression a message holds ("What is 12 x 7?" -> "12 * 7"), or None: the
    longest run of numbers joined by operators that parses, with "plus", "times", "x", "÷" and
    "^" read as the operators they name."""
    found = []
    for match in _EXPRESSION.finditer(_symbolic(text)):
        span = " ".join(_balanced(match.group(0)).split())
        try:
            ast.parse(span, mode="eval")
        except SyntaxError:
            continue
        found.append(span)
    return max(found, key=len, default=None)


_STOPWORDS = frozenset("""
a about above after again all also am an and any are as at be been before being below between both but by can
could current did do does doing done for from get give had has have having he her here hers him his how i if in
into is it its just know let like make may me might more most much must my need no nor not now of off on once
only or other our out over please put same say see shall she should show so some such tell than thank thanks
that the their them then there these they this those through to too under up us use using very want was we
were what when where which while who whom why will with would yes you your yours
question answer return thing something way help information info result
""".split())

#: words that name the same thing: a message using one is about a tool using another
_RELATED = (
    ("arithmetic", "calculate", "calculator", "calculation", "compute", "evaluate", "expression", "math",
     "maths", "add", "sum", "plus", "subtract", "minus", "multiply", "product", "divide", "quotient",
     "number", "integer"),
    ("time", "clock", "date", "today", "hour", "day", "timezone"),
    ("weather", "forecast", "temperature", "rain", "sunny"),
    ("research", "investigate", "study"),
    ("search", "find", "lookup"),
    ("buy", "purchase", "pay", "payment", "charge", "bill", "invoice", "price", "cost", "order", "shop"),
    ("wipe", "clean", "clear", "erase", "delete", "remove", "purge"),
)

#: a message made only of these asks the model to go ahead with whatever its tools do
_GO_AHEAD = frozenset("go on again continue proceed run start do it now please more and yes ok okay sure next "
                      "ahead try retry once one the tools tool".split())


def _stem(word: str) -> str:
    for suffix, keep in (("ations", 5), ("ation", 5), ("ing", 5), ("ers", 5), ("er", 5), ("ies", 4), ("es", 5),
                         ("ed", 5), ("s", 4)):
        if word.endswith(suffix) and len(word) >= keep + len(suffix) - 1 and not word.endswith("ss"):
            stem = word[: -len(suffix)]
            return stem + "y" if suffix == "ies" else stem
    return word


_RELATED_STEMS = [frozenset(_stem(w) for w in group) for group in _RELATED]


def _words(text: str) -> list[str]:
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)
    return re.findall(r"[a-z]+", spaced.lower())


def _topics(text: str, *, expand: bool) -> set[str]:
    """The stems of a text's meaningful words; with ``expand``, their related words too."""
    stems = {_stem(w) for w in _words(text) if w not in _STOPWORDS and len(w) > 1}
    if expand:
        for group in _RELATED_STEMS:
            if stems & group:
                stems |= group
    return stems


def _message_topics(message: str) -> set[str]:
    topics = _topics(_symbolic(message), expand=True)
    if arithmetic_in(message):
        topics |= next(g for g in _RELATED_STEMS if _stem("arithmetic") in g)
    return topics


def _go_ahead(message: str) -> bool:
    words = _words(message)
    return bool(words) and not re.search(r"\d", message) and all(w in _GO_AHEAD for w in words)


def tools_about(message: str, tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The offered tools (function objects) a message is about, in the order offered: those
    whose name or description shares a word (or a related word) with it."""
    wanted = _message_topics(message)
    return [fn for fn in tools
            if wanted & _topics(f"{fn.get('name', '')} {fn.get('description') or ''}", expand=False)]


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



def _result_message(content: str) -> str | None:
    """The words of a result that is a JSON object carrying them (a subagent's ``message``,
    with the names of the files it attached)."""
    try:
        data = json.loads(content)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    words = next((" ".join(data[key].split()) for key in ("message", "summary", "answer", "text")
                  if isinstance(data.get(key), str) and data[key].strip()), None)
    files = [str(a.get("name") or a.get("path")) for a in data.get("attachments") or [] if isinstance(a, dict)]
    if words is not None and files:
        words += f" (attached: {', '.join(files)})"
    return words


def _answer_from(recent: Sequence[dict[str, Any]], results: Sequence[dict[str, Any]]) -> str:
    """The final answer from a step's tool results, in words: arithmetic as ``expr = value``,
    a result carrying a message as that message, anything else as ``Tool results: name -> result``."""
    calls: dict[str, tuple[str, str]] = {}
    for message in recent:
        for call in message.get("tool_calls") or []:
            fn = call.get("function") or {}
            calls[str(call.get("id"))] = (str(fn.get("name", "")), str(fn.get("arguments") or ""))
    said: list[str] = []
    listed: list[str] = []
    for result in results:
        name, arguments = calls.get(str(result.get("tool_call_id")), (str(result.get("name") or "tool"), ""))
        content = _content_text(result.get("content")).strip()
        expression = None
        try:
            values = json.loads(arguments) if arguments else {}
        except ValueError:
            values = {}
        if isinstance(values, dict):
            expression = next((v for v in values.values() if isinstance(v, str) and arithmetic_in(v) == v), None)
        words = _result_message(content)
        if expression is not None and re.fullmatch(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", content):
            said.append(f"{expression} = {content}")
        elif expression is not None and expression in content and "=" in content and "\n" not in content:
            said.append(_truncate(content))
        elif words is not None:
            said.append(_truncate(words, 200))
        else:
            listed.append(f"{name} -> {_truncate(content)}")
    text = "; ".join(said)
    if listed:
        text = (text + ". " if text else "") + "Tool results: " + "; ".join(listed)
    return text


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
        hint = _content_text(request.messages[last_user].get("content")) if last_user >= 0 else ""
        forced = _forced_choice(request)
        if forced is None:
            # left to itself, it calls what the message is about (a closing move once it replied)
            open_tools = [fn for fn in due if str(fn.get("name", "")) not in closing]
            wanted = open_tools if _go_ahead(hint) else tools_about(hint, open_tools)
            due = [fn for fn in due if fn in wanted or str(fn.get("name", "")) in closing]
        elif forced == "none":
            due = []
        elif forced == "required":
            due = due or offered
            if not due:
                raise self._refusal("tool_choice 'required' needs at least one tool, and the request offers none")
        else:
            name = forced.removeprefix("tool:")
            due = [fn for fn in offered if fn.get("name") == name]
            if not due:
                raise self._refusal(f"tool_choice names the tool {name!r}, which the request does not offer "
                                    f"(it offers {', '.join(repr(fn.get('name')) for fn in offered) or 'none'})")
        if due and (not results or forced is not None):
            calls = []
            for fn in due:
                name = str(fn.get("name", "tool"))
                args = arguments_for_schema(fn.get("parameters") or {}, None if name in closing else hint or None)
                calls.append(ToolCall(id=self._next_id(), name=name, arguments=json.dumps(args)))
            return ModelResponse(tool_calls=calls)
        if results:
            structured = _structured_schema(request)
            if structured is not None:
                return ModelResponse(text=json.dumps(value_for_schema(structured)))
            return ModelResponse(text=_answer_from(recent, results))
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
