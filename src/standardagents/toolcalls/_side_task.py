"""One-shot side tasks: ask a model one question outside the conversation.

Titles, summaries for compaction, classification: small requests that want a plain answer
or a JSON value back. Models wrap JSON in fences, prose and reasoning, so the answer is read
robustly rather than trusted to be clean.
"""

from __future__ import annotations

import json
import re
from typing import Any

import json_repair
import jsonschema

from ..exceptions import ProviderError
from ..providers.base import ModelProvider, ModelRequest
from ._arguments import coerce_to_schema, find_json_end
from ._thinking import strip_thinking

__all__ = ["ask", "ask_json", "parse_json"]

_FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_NOT_JSON = object()


def _messages(prompt: str | list[dict[str, Any]], system: str | None) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    if isinstance(prompt, str):
        messages.append({"role": "user", "content": prompt})
    else:
        messages.extend(prompt)
    return messages


async def ask(
    provider: ModelProvider,
    model: str,
    prompt: str | list[dict[str, Any]],
    *,
    system: str | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
) -> str:
    """Send one prompt (text, or chat messages) and return the reply's text without reasoning."""
    request = ModelRequest(
        model=model,
        messages=_messages(prompt, system),
        max_tokens=max_tokens,
        temperature=temperature,
    )
    response = await provider.request(request)
    text, _ = strip_thinking(response.text or "")
    return text


def parse_json(text: str) -> Any:
    """The JSON value in a model's answer: reasoning, fences and surrounding prose are ignored.

    Raises :class:`ValueError` when the answer holds no JSON value.
    """
    body, _ = strip_thinking(text)
    try:
        return json.loads(body)
    except ValueError:
        pass
    fence = _FENCE.search(body)
    if fence is not None:
        body = fence.group(1).strip()
        try:
            return json.loads(body)
        except ValueError:
            pass
    starts = [i for i in (body.find("{"), body.find("[")) if i >= 0]
    if not starts:
        raise ValueError("the answer holds no JSON object or array")
    start = min(starts)
    end = find_json_end(body, start)
    candidate = body[start:end] if end is not None else body[start:]
    try:
        return json.loads(candidate)
    except ValueError:
        value = json_repair.loads(candidate)
    if value == "" or value is None:
        raise ValueError("the answer's JSON could not be repaired")
    return value


async def ask_json(
    provider: ModelProvider,
    model: str,
    prompt: str | list[dict[str, Any]],
    *,
    schema: dict[str, Any] | None = None,
    system: str | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
    attempts: int = 2,
) -> Any:
    """Ask for a JSON answer and return the parsed value.

    With ``schema`` the model is shown it, the value is coerced towards it and validated;
    an unreadable or invalid answer is asked again (``attempts`` in all) with the problem
    stated, then raises :class:`ProviderError` with code ``bad_answer``.
    """
    instruction = "Answer with JSON only, no prose."
    if schema is not None:
        instruction += " The JSON must match this schema:\n" + json.dumps(schema)
    system_text = f"{system}\n\n{instruction}" if system else instruction
    messages = _messages(prompt, system_text)
    problem = ""
    for _ in range(max(1, attempts)):
        request = ModelRequest(
            model=model, messages=messages, max_tokens=max_tokens, temperature=temperature
        )
        response = await provider.request(request)
        answer = response.text or ""
        try:
            value = parse_json(answer)
            if schema is not None:
                value, _ = coerce_to_schema(value, schema)
                jsonschema.validate(value, schema)
            return value
        except ValueError as exc:
            problem = f"the answer was not JSON ({exc})"
        except jsonschema.ValidationError as exc:
            problem = f"the answer did not match the schema: {exc.message}"
        messages = [
            *messages,
            {"role": "assistant", "content": answer},
            {
                "role": "user",
                "content": f"That did not work: {problem}. Answer again with JSON only.",
            },
        ]
    raise ProviderError(
        f"model {model!r} gave no usable JSON answer after {max(1, attempts)} attempts: {problem}",
        code="bad_answer",
        retriable=True,
    )
