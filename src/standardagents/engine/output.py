"""Typed results: a turn whose final answer must be a value of a given type.

An ``output_type`` (a Pydantic model, a dataclass, a ``TypedDict``, a list or union of
those, or a JSON Schema dict) becomes an :class:`OutputSpec`: the JSON Schema shown to the
model and a validator. How the model is asked for the value depends on what its endpoint
accepts, tried from the tightest to the loosest and remembered per endpoint and model in
the runtime's capability latches:

``native``
    the endpoint's own structured output (``response_format`` json_schema on
    OpenAI-compatible endpoints);
``tool``
    an output tool the model calls with the value to finish (forced on Anthropic, which is
    its way of producing structured output);
``prompted``
    the schema in the system prompt and a JSON answer, extracted and repaired.

A value that does not validate goes back to the model with the exact errors, within the
turn's retry budget; past it the turn ends with outcome ``output_invalid``. This module
knows nothing of the loop: the loop asks :class:`OutputRun` to shape each request and to
judge each reply.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

import jsonschema
from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from ..exceptions import StandardAgentsError
from ..records import Message, ToolCall, new_id
from ..toolcalls import OutputMode, coerce_to_schema, is_grammar_error, parse_json, prepare_tools

if TYPE_CHECKING:
    from ..definitions import ModelDefinition
    from ..providers.base import ModelRequest
    from ..toolcalls import CapabilityLatches

__all__ = [
    "DEFAULT_OUTPUT_RETRIES",
    "OUTPUT_TOOL_NAME",
    "UNCHANGED",
    "OutputRun",
    "OutputSpec",
    "PartialOutput",
    "Verdict",
    "default_mode",
    "output_spec",
    "spec_from_state",
]

OUTPUT_TOOL_NAME = "final_result"
DEFAULT_OUTPUT_RETRIES = 2
_ERROR_LIMIT = 20


@dataclass(frozen=True, eq=False)
class OutputSpec:
    """What a typed final answer must be: its schema and how to validate it.

    ``wrapped`` is true when the value is not a JSON object (a list, a union, a scalar):
    tool arguments and ``response_format`` need an object, so the model is asked for
    ``{"result": value}`` and the wrapper is removed before validation.
    """

    schema: dict[str, Any]
    name: str
    wrapped: bool
    adapter: TypeAdapter[Any] | None = None
    source: Any = None
    _validator: Any = field(default=None, repr=False)

    @cached_property
    def object_schema(self) -> dict[str, Any]:
        """The schema as an object (what native output and the output tool carry)."""
        if not self.wrapped:
            return self.schema
        inner = {k: v for k, v in self.schema.items() if k not in ("$defs", "definitions")}
        wrapper: dict[str, Any] = {"type": "object", "properties": {"result": inner}, "required": ["result"]}
        for key in ("$defs", "definitions"):
            if key in self.schema:
                wrapper[key] = self.schema[key]
        return wrapper

    def unwrap(self, data: Any) -> Any:
        if self.wrapped and isinstance(data, dict) and set(data) == {"result"}:
            return data["result"]
        return data

    def validate(self, data: Any) -> tuple[Any, Any, list[str]]:
        """``(value, json_value, errors)``: the typed value and its JSON form, or the errors."""
        data = self.unwrap(data)
        if self.adapter is not None:
            try:
                value = self.adapter.validate_python(data)
            except ValidationError as exc:
                return None, None, [_pydantic_error(e) for e in exc.errors()[:_ERROR_LIMIT]]
            return value, self.adapter.dump_python(value, mode="json"), []
        data, _ = coerce_to_schema(data, self.schema)
        errors = [_schema_error(e) for e in sorted(self._validator.iter_errors(data), key=lambda e: list(e.path))]
        if errors:
            return None, None, errors[:_ERROR_LIMIT]
        return data, data, []

    @cached_property
    def _tool(self) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": OUTPUT_TOOL_NAME,
            "description": "Give your final answer by calling this tool; its arguments are the answer.",
            "parameters": self.object_schema}}

    def tool(self) -> dict[str, Any]:
        """The output tool in chat-completions shape (one shared dict: do not change it)."""
        return self._tool

    def response_format(self) -> dict[str, Any]:
        """``response_format`` asking for the schema (one shared dict: do not change it)."""
        return self._response_format

    @cached_property
    def _response_format(self) -> dict[str, Any]:
        return {"type": "json_schema", "json_schema": {"name": self.name, "schema": self.object_schema, "strict": False}}

    def instruction(self) -> str:
        return ("Your final answer must be one JSON value matching this JSON Schema, with no other text:\n"
                + json.dumps(self.schema, separators=(",", ":")))

    @cached_property
    def ref(self) -> str | None:
        """A name for a Python type's spec that this process can look up again (its qualified
        name and a digest of its schema); ``None`` for a plain JSON Schema, which is its own
        description."""
        if self.adapter is None:
            return None
        qualified = f"{getattr(self.source, '__module__', '')}.{getattr(self.source, '__qualname__', repr(self.source))}"
        digest = hashlib.sha256(json.dumps(self.schema, sort_keys=True, default=str).encode()).hexdigest()[:16]
        return f"{qualified}#{digest}"

    @cached_property
    def state(self) -> dict[str, Any]:
        """What an execution record keeps of this spec, so a paused or interrupted turn resumes
        with it: the JSON Schema, and the :attr:`ref` of a Python type (one shared dict)."""
        kept: dict[str, Any] = {"schema": self.schema}
        if self.ref is not None:
            kept["ref"] = self.ref
        return kept


_SPECS: dict[Any, OutputSpec] = {}
_SPECS_MAX = 256
# the specs of Python types made in this process, by ref: a turn resumed here validates into
# the caller's own type again (types are code, so few; the oldest goes past the bound)
_KNOWN: dict[str, OutputSpec] = {}
_KNOWN_MAX = 1024


def output_spec(output_type: Any) -> OutputSpec:
    """An :class:`OutputSpec` for a type or a JSON Schema; a bad one raises a clear error.

    Specs are remembered per type (and per schema text): building a validator and its JSON
    Schema costs milliseconds, far more than a step, and a typed call repeats its type."""
    if isinstance(output_type, OutputSpec):
        return output_type
    try:
        key: Any = ("schema", json.dumps(output_type, sort_keys=True)) if isinstance(output_type, dict) else output_type
        cached = _SPECS.get(key)
    except (TypeError, ValueError):  # an unhashable type or a schema that is not JSON
        key, cached = None, None
    if cached is not None:
        return cached
    spec = _build_spec(output_type)
    if key is not None:
        if len(_SPECS) >= _SPECS_MAX:
            _SPECS.pop(next(iter(_SPECS)))
        _SPECS[key] = spec
    ref = spec.ref
    if ref is not None:
        if ref not in _KNOWN and len(_KNOWN) >= _KNOWN_MAX:
            _KNOWN.pop(next(iter(_KNOWN)))
        _KNOWN[ref] = spec
    return spec


def spec_from_state(kept: Any) -> OutputSpec | None:
    """The spec an execution record kept (see :attr:`OutputSpec.state`): the caller's own
    Python type when this process made it, else its JSON Schema (the value is then the
    validated JSON). ``None`` when nothing usable was kept."""
    if not isinstance(kept, dict) or not isinstance(kept.get("schema"), dict):
        return None
    ref = kept.get("ref")
    if isinstance(ref, str):
        known = _KNOWN.get(ref)
        if known is not None:
            return known
    try:
        return output_spec(kept["schema"])
    except StandardAgentsError:
        return None


def _build_spec(output_type: Any) -> OutputSpec:
    if isinstance(output_type, dict):
        try:
            cls = jsonschema.validators.validator_for(output_type)
            cls.check_schema(output_type)
        except jsonschema.SchemaError as exc:
            raise StandardAgentsError(f"output_type is not a valid JSON Schema: {exc.message}") from exc
        name = _schema_name(str(output_type.get("title") or "output"))
        return OutputSpec(dict(output_type), name, _needs_wrapper(output_type), None, output_type, cls(output_type))
    if output_type is None or isinstance(output_type, str | int | float | bool):
        raise StandardAgentsError(
            f"output_type must be a type (a Pydantic model, dataclass, TypedDict, list or union of those) "
            f"or a JSON Schema dict, not {output_type!r}")
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        schema = adapter.json_schema()
    except Exception as exc:  # pydantic raises several kinds for types it cannot handle
        raise StandardAgentsError(f"output_type {output_type!r} cannot be validated: {exc}") from exc
    name = _schema_name(getattr(output_type, "__name__", None) or str(schema.get("title") or "output"))
    return OutputSpec(schema, name, _needs_wrapper(schema), adapter, output_type)


def to_jsonable(value: Any) -> Any:
    """A typed value's JSON form (for events, the store and the wire)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return to_jsonable_python(value)


def default_mode(model: ModelDefinition) -> OutputMode:
    """The tightest way the model's provider can produce typed output."""
    if model.provider in ("openai", "test"):
        return "native"
    return "tool"


@dataclass
class Verdict:
    """What a reply meant for the typed output."""

    kind: Literal["value", "retry", "invalid"]
    value: Any = None
    json_value: Any = None
    errors: list[str] = field(default_factory=list)
    #: the output tool's call in the reply (tool mode), answered by the loop
    call: ToolCall | None = None
    #: the message the model reads next when it must try again
    feedback: str | None = None


class OutputRun:
    """One side's typed output during one turn: the mode per request and the retry budget."""

    def __init__(self, spec: OutputSpec, retries: int) -> None:
        self.spec = spec
        self.retries = retries
        self.failures = 0
        self.mode: OutputMode = "native"
        self._base: tuple[ModelRequest, list[dict[str, Any]], Any] | None = None
        #: whether the last request offered other tools beside the output tool
        self._others = False
        self._last_check: tuple[str, tuple[Any, Any, list[str]] | None] | None = None

    # requests ----------------------------------------------------------------------------
    def shape(self, request: ModelRequest, model: ModelDefinition, latches: CapabilityLatches,
              level: str | None) -> None:
        """Make ``request`` ask ``model`` for the typed value the way its endpoint accepts."""
        base = self._base
        if base is None or base[0] is not request:
            # the request as the loop built it (a fallback model is shaped from it again)
            base = self._base = (request, request.messages, request.tool_choice)
        _, messages, choice = base
        endpoint = model.base_url or model.provider
        mode = latches.output_mode_for(endpoint, model.model) or default_mode(model)
        if mode == "tool" and level == "no_tools":
            mode = "prompted"
        self.mode = mode
        request.messages = messages
        request.response_format = None
        if mode == "native":
            request.response_format = self.spec.response_format()
        elif mode == "tool":
            tool = self.spec.tool()
            if level is not None:
                tool = prepare_tools([tool], level)[0]  # type: ignore[arg-type]
            others = [t for t in request.tools if (t.get("function") or {}).get("name") != OUTPUT_TOOL_NAME]
            request.tools = [*others, tool]
            self._others = bool(others)
            if model.provider == "anthropic":
                request.tool_choice = "required" if others else {"type": "function", "function": {"name": OUTPUT_TOOL_NAME}}
            else:
                request.tool_choice = choice
        else:
            instruction = self.spec.instruction()
            if messages and messages[0].get("role") == "system":
                request.messages = [{"role": "system", "content": f"{messages[0].get('content') or ''}\n\n{instruction}"},
                                    *messages[1:]]
            else:
                request.messages = [{"role": "system", "content": instruction}, *messages]

    def refused(self, error: Any, model: ModelDefinition, latches: CapabilityLatches) -> bool:
        """After a request failed before its first token: when the endpoint refused the way
        typed output was asked for, latch the next mode and return True (send it again)."""
        if self.mode == "prompted":
            return False
        status = getattr(error, "status", None)
        text = str(error).lower() + json.dumps(getattr(error, "body", None), default=str).lower()
        if self.mode == "native":
            named = "response_format" in text or "json_schema" in text or "structured output" in text
            if not (is_grammar_error(error) or (status in (400, 422) and named)):
                return False
        elif not (is_grammar_error(error) and (OUTPUT_TOOL_NAME in text or not self._others)):
            return False
        endpoint = model.base_url or model.provider
        return latches.escalate_output(endpoint, model.model, self.mode) is not None

    # replies -----------------------------------------------------------------------------
    def matches(self, text: str) -> bool:
        """Whether ``text`` is already a valid answer (so it is not taken for typed tool calls);
        the outcome is kept for :meth:`judge` of the same text."""
        if self.mode == "tool":
            return False
        checked = self._checked(text)
        return checked is not None and not checked[2]

    def _checked(self, text: str) -> tuple[Any, Any, list[str]] | None:
        """``spec.validate`` of the JSON in ``text`` (None: no JSON), remembered for one text."""
        last = self._last_check
        if last is not None and last[0] == text:
            return last[1]
        try:
            # most answers are the bare JSON: read at once, without looking for reasoning or fences
            data = json.loads(text)
        except ValueError:
            try:
                data = parse_json(text) if text.strip() else None
            except ValueError:
                data = None
        result = None if data is None else self.spec.validate(data)
        self._last_check = (text, result)
        return result

    def judge(self, reply: Message) -> Verdict | None:
        """The verdict on a reply, or ``None`` when the reply only calls other tools."""
        calls = reply.tool_calls
        if calls:
            for call in calls:
                if call.name == OUTPUT_TOOL_NAME:
                    return self._check_text(call.arguments, call)
            return None  # only other tools: the loop runs them (most steps of a typed turn)
        if self.mode == "tool":
            return self._failed([f"no call to {OUTPUT_TOOL_NAME}"], None,
                                f"To finish, call the tool {OUTPUT_TOOL_NAME} with your answer as its arguments.")
        return self._check_text(reply.content or "", None)

    def _check_text(self, text: str, call: ToolCall | None) -> Verdict:
        if not text.strip():
            return self._failed(["the answer is empty"], call)
        checked = self._checked(text)
        if checked is None:
            try:
                parse_json(text)
            except ValueError as exc:
                return self._failed([f"the answer is not JSON ({exc})"], call)
            return self._failed(["the answer is empty"], call)
        value, json_value, errors = checked
        if errors:
            return self._failed(errors, call)
        return Verdict("value", value, json_value, call=call)

    def _failed(self, errors: list[str], call: ToolCall | None, feedback: str | None = None) -> Verdict:
        self.failures += 1
        if self.failures > self.retries:
            return Verdict("invalid", errors=errors, call=call)
        if feedback is None:
            shown = "\n".join(f"- {e}" for e in errors)
            how = (f"Call {OUTPUT_TOOL_NAME} again with corrected arguments." if call is not None
                   else "Answer again with the corrected JSON only.")
            feedback = f"The answer does not match the required schema:\n{shown}\n{how}"
        return Verdict("retry", errors=errors, call=call, feedback=feedback)

    def tool_message(self, thread_id: str, verdict: Verdict, side: Any) -> Message | None:
        """The result of the output tool's call, so the transcript stays well formed."""
        call = verdict.call
        if call is None:
            return None
        if verdict.kind == "value":
            return Message(thread_id=thread_id, role="tool", content="Final result accepted.", tool_call_id=call.id,
                           name=call.name, side=side, tool_status="success")
        text = verdict.feedback or "The answer does not match the required schema:\n" + "\n".join(verdict.errors)
        return Message(thread_id=thread_id, role="tool", content=f"Error: {text}", tool_call_id=call.id,
                       name=call.name, side=side, tool_status="error")

    def retry_message(self, thread_id: str, verdict: Verdict, side: Any) -> Message | None:
        """The message asking for another answer (none when the tool result says it)."""
        if verdict.call is not None or verdict.feedback is None:
            return None
        return Message(thread_id=thread_id, role="user", content=verdict.feedback, id=new_id("msg_"), side=side,
                       silent=True, metadata={"outputRetry": self.failures})


_UNCHANGED: Any = object()
# a partial value can only have grown when a piece holds one of these
_STRUCTURE = frozenset(',:]}"0123456789eltf')


class PartialOutput:
    """The typed answer as it streams: the value parsed from the JSON received so far.

    Parsing waits for a piece that can change the value (structure, a string's end, a
    digit...), and :meth:`feed` answers only when the value differs from the last one, so a
    client sees the object grow field by field without a flood of identical events."""

    __slots__ = ("_last", "_parts", "spec")

    def __init__(self, spec: OutputSpec) -> None:
        self.spec = spec
        self._parts: list[str] = []
        self._last = ""

    def feed(self, piece: str) -> Any:
        """The new partial value, or :data:`UNCHANGED`."""
        self._parts.append(piece)
        if not _STRUCTURE.intersection(piece):
            return _UNCHANGED
        text = "".join(self._parts).lstrip()
        if text.startswith("```"):
            text = text.split("\n", 1)[1] if "\n" in text else ""
        if not text or text[0] not in "{[":
            return _UNCHANGED
        closed = complete_json(text)
        if closed is None:
            return _UNCHANGED
        try:
            value = json.loads(closed)
        except ValueError:
            return _UNCHANGED
        if value in ("", None):
            return _UNCHANGED
        value = self.spec.unwrap(value) if isinstance(value, dict) and set(value) == {"result"} else value
        shown = json.dumps(value, sort_keys=True, default=str)
        if shown == self._last:
            return _UNCHANGED
        self._last = shown
        return value


UNCHANGED = _UNCHANGED
_TRAILING_TOKEN = re.compile(r"[\w.+-]+$")


def complete_json(text: str) -> str | None:
    """The longest complete JSON prefix of ``text``, closed: an unfinished string value is
    closed, an unfinished key, number or literal is dropped with its separator, and open
    objects and arrays are closed. ``None`` when nothing usable remains."""
    stack: list[str] = []
    in_str = escaped = is_key = False
    start = -1
    last = ""
    for i, c in enumerate(text):
        if in_str:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_str = False
                last = "k" if is_key else "v"
            continue
        if c == '"':
            in_str, start = True, i
            is_key = bool(stack) and stack[-1] == "{" and last in ("{", ",")
        elif c in "{[":
            stack.append(c)
            last = c
        elif c in "}]":
            if stack:
                stack.pop()
            last = c
        elif c in ",:":
            last = c
        elif not c.isspace():
            last = "v"
    if in_str:
        text = text[:start] if is_key else (text[:-1] if escaped else text) + '"'
    closers = "".join("}" if b == "{" else "]" for b in reversed(stack))
    for _ in range(3):
        text = _drop_dangling(text.rstrip())
        candidate = text + closers
        try:
            json.loads(candidate)
        except ValueError:
            token = _TRAILING_TOKEN.search(text)
            if token is None:
                return None
            text = text[:token.start()]
            continue
        return candidate
    return None


def _drop_dangling(text: str) -> str:
    """``text`` without a trailing comma, or a trailing key with its colon."""
    while text:
        if text.endswith(","):
            text = text[:-1].rstrip()
        elif text.endswith(":"):
            text = text[:-1].rstrip()
            if text.endswith('"'):
                text = text[:text.rfind('"', 0, len(text) - 1)].rstrip()
        else:
            break
    return text


def _needs_wrapper(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if kind == "object":
        return False
    if kind is None and "properties" in schema and not any(k in schema for k in ("anyOf", "oneOf", "allOf")):
        return False
    ref = schema.get("$ref")
    if isinstance(ref, str) and kind is None:
        target = (schema.get("$defs") or schema.get("definitions") or {}).get(ref.rsplit("/", 1)[-1], {})
        return not (isinstance(target, dict) and target.get("type") == "object")
    return True


def _schema_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "_-" else "_" for c in name)[:64]
    return cleaned or "output"


def _pydantic_error(error: Any) -> str:
    loc = ".".join(str(p) for p in error.get("loc", ()))
    msg = str(error.get("msg", "invalid"))
    return f"{loc}: {msg}" if loc else msg


def _schema_error(error: jsonschema.ValidationError) -> str:
    loc = ".".join(str(p) for p in error.path)
    return f"{loc}: {error.message}" if loc else error.message
