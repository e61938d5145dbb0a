"""Google Gemini through its native API (``generateContent``, ``streamGenerateContent``),
written as a provider definition: the worked example of ``define_provider``.

The definition at the bottom (:data:`gemini`) declares the configuration (the key from
``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``, an optional ``GEMINI_BASE_URL``), the models it
serves with their capabilities and prices, and a factory making a :class:`GeminiProvider`.
The provider speaks through the maintained ``google-genai`` SDK (an optional extra:
``pip install 'standardagents[gemini]'``), imported only when one is built.

The engine's chat-completions shapes are converted here, as pure functions tested without a
network: the system prompt becomes ``systemInstruction``, assistant turns ``model`` turns,
tool calls ``functionCall`` parts and tool results ``functionResponse`` parts (named after
the call they answer). Gemini signs the function calls of thinking models; each signature
comes back as a ``thinking_blocks`` entry of the reply and goes out again on its call.
Parts the model produced on its own (images, code it ran, web pages it searched) land in
``ModelResponse.metadata`` as provider results.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx2

from ..definitions.provider import (
    ProviderFactoryConfig,
    define_provider,
    provider_const,
    provider_env,
)
from ..definitions.reasoning import ReasoningLevel
from ..exceptions import ProviderError
from ..observability.tracing import trace_headers
from ..records import ToolCall, Usage
from .base import (
    PROVIDER_RESULTS_KEY,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    ProviderExecutedToolResult,
    ProviderGeneratedImage,
    ProviderWebSearchResult,
    ReasoningDelta,
    StreamDelta,
    StreamEnd,
    TextDelta,
    ToolCallDelta,
)
from .reasoning import gemini_thinking_config

__all__ = [
    "DEFAULT_API_VERSION",
    "SIGNATURE_BLOCK",
    "GeminiProvider",
    "GeminiStreamAssembler",
    "from_gemini_response",
    "gemini",
    "to_gemini_config",
    "to_gemini_contents",
    "to_gemini_tool_config",
    "to_gemini_tools",
]

DEFAULT_API_VERSION = "v1beta"
#: the ``thinking_blocks`` entry type carrying one of Gemini's thought signatures
SIGNATURE_BLOCK = "gemini_thought_signature"
_FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter", "RECITATION": "content_filter",
           "BLOCKLIST": "content_filter", "PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter",
           "IMAGE_SAFETY": "content_filter", "MALFORMED_FUNCTION_CALL": "error"}
_RETRY_STATUSES = (408, 409, 429)


# -- requests -----------------------------------------------------------------------------

def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text")


def _image_part(part: Mapping[str, Any]) -> dict[str, Any]:
    image = part.get("image_url")
    url = image.get("url", "") if isinstance(image, Mapping) else str(image or "")
    if url.startswith("data:") and ";base64," in url:
        header, data = url[5:].split(";base64,", 1)
        return {"inline_data": {"mime_type": header or "image/png", "data": base64.b64decode(data)}}
    lowered = url.lower().split("?", 1)[0]
    mime = next((m for ext, m in ((".png", "image/png"), (".webp", "image/webp"), (".gif", "image/gif"))
                 if lowered.endswith(ext)), "image/jpeg")
    return {"file_data": {"file_uri": url, "mime_type": mime}}


def _user_parts(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}] if content else []
    parts: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, Mapping):
            parts.append({"text": str(part)})
        elif part.get("type") == "text":
            parts.append({"text": str(part.get("text", ""))})
        elif part.get("type") == "image_url":
            parts.append(_image_part(part))
    return parts


def _arguments(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, Mapping):
        return dict(arguments)
    try:
        value = json.loads(arguments or "{}")
    except (TypeError, ValueError):
        return {"_raw": str(arguments)}
    return value if isinstance(value, dict) else {"value": value}


def _standard_b64(value: Any) -> str | None:
    """A signature as the wire spells it: the SDK's JSON dumps bytes in URL-safe base64."""
    if not value:
        return None
    text = str(value).replace("-", "+").replace("_", "/")
    return text + "=" * (-len(text) % 4)


def _signature(blocks: Any, call_id: str | None) -> bytes | None:
    for block in blocks or ():
        if isinstance(block, Mapping) and block.get("type") == SIGNATURE_BLOCK and block.get("call_id") == call_id:
            try:
                return base64.b64decode(str(block.get("signature", "")))
            except (binascii.Error, ValueError):
                return None
    return None


def to_gemini_contents(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """Chat-completions messages as Gemini's system instruction and ``contents``.

    Consecutive turns of one role are merged (tool results join one ``user`` turn), and a
    tool result is named after the call it answers, because ``functionResponse`` needs it.
    """
    system: list[str] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}

    def add(role: str, parts: list[dict[str, Any]]) -> None:
        if not parts:
            return
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})

    for message in messages:
        role = message.get("role")
        if role in ("system", "developer"):
            text = _text_of(message.get("content"))
            if text:
                system.append(text)
        elif role == "user":
            add("user", _user_parts(message.get("content")))
        elif role == "assistant":
            blocks = message.get("thinking_blocks")
            parts: list[dict[str, Any]] = []
            text = _text_of(message.get("content"))
            if text:
                part: dict[str, Any] = {"text": text}
                signed = _signature(blocks, None)
                if signed is not None:
                    part["thought_signature"] = signed
                parts.append(part)
            for call in message.get("tool_calls") or ():
                fn = call.get("function") or {}
                call_id = str(call.get("id", ""))
                names[call_id] = str(fn.get("name", ""))
                part = {"function_call": {"id": call_id, "name": names[call_id],
                                          "args": _arguments(fn.get("arguments"))}}
                signed = _signature(blocks, call_id)
                if signed is not None:
                    part["thought_signature"] = signed
                parts.append(part)
            add("model", parts)
        elif role == "tool":
            call_id = str(message.get("tool_call_id", ""))
            text = _text_of(message.get("content"))
            failed = bool(message.get("is_error") or message.get("tool_status") == "error")
            add("user", [{"function_response": {"id": call_id, "name": names.get(call_id) or str(message.get("name") or "tool"),
                                                "response": {"error": text} if failed else {"result": text}}}])
    return ("\n\n".join(system) or None), contents


def to_gemini_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat-completions function tools as one Gemini tool of function declarations (their
    JSON Schemas sent whole, as ``parametersJsonSchema``)."""
    declarations = []
    for tool in tools:
        fn = tool.get("function") or tool
        entry: dict[str, Any] = {"name": str(fn.get("name", ""))}
        if fn.get("description"):
            entry["description"] = str(fn["description"])
        entry["parameters_json_schema"] = fn.get("parameters") or {"type": "object", "properties": {}}
        declarations.append(entry)
    return [{"function_declarations": declarations}] if declarations else []


def to_gemini_tool_config(choice: str | dict[str, Any] | None) -> dict[str, Any] | None:
    """``auto``/``required``/``none`` or one named function, as a function-calling mode."""
    if choice is None:
        return None
    if isinstance(choice, str):
        mode = {"auto": "AUTO", "required": "ANY", "any": "ANY", "none": "NONE"}.get(choice, "AUTO")
        return {"function_calling_config": {"mode": mode}}
    name = (choice.get("function") or {}).get("name") or choice.get("name")
    if not name:
        return {"function_calling_config": {"mode": "AUTO"}}
    return {"function_calling_config": {"mode": "ANY", "allowed_function_names": [str(name)]}}


def to_gemini_config(request: ModelRequest, system: str | None) -> dict[str, Any]:
    """The ``GenerateContentConfig`` of a request (sampling, tools, output format, thinking)."""
    config: dict[str, Any] = {}
    if system:
        config["system_instruction"] = system
    if request.tools:
        config["tools"] = to_gemini_tools(request.tools)
        tool_config = to_gemini_tool_config(request.tool_choice)
        if tool_config is not None:
            config["tool_config"] = tool_config
    if request.max_tokens is not None:
        config["max_output_tokens"] = request.max_tokens
    if request.temperature is not None:
        config["temperature"] = request.temperature
    if request.top_p is not None:
        config["top_p"] = request.top_p
    if request.stop:
        config["stop_sequences"] = list(request.stop)
    fmt = request.response_format
    if fmt is not None:
        config["response_mime_type"] = "application/json"
        schema = (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else None
        if schema is not None:
            config["response_json_schema"] = schema
    if request.reasoning is not None:
        thinking = gemini_thinking_config(request.reasoning)
        config["thinking_config"] = {"thinking_budget": thinking["thinkingBudget"],
                                     **({"include_thoughts": True} if thinking.get("includeThoughts") else {})}
    options: dict[str, Any] = {}
    if request.extra_body:
        options["extra_body"] = dict(request.extra_body)
    if request.timeout is not None:
        options["timeout"] = int(request.timeout * 1000)
    traced = trace_headers()
    if traced:
        options["headers"] = dict(traced)
    if options:
        config["http_options"] = options
    return config


# -- replies ------------------------------------------------------------------------------

def _usage(data: Mapping[str, Any] | None) -> Usage | None:
    if not data:
        return None
    prompt = int(data.get("prompt_token_count") or 0)
    thoughts = int(data.get("thoughts_token_count") or 0)
    completion = int(data.get("candidates_token_count") or 0) + thoughts
    return Usage(prompt_tokens=prompt, completion_tokens=completion,
                 total_tokens=int(data.get("total_token_count") or (prompt + completion)),
                 reasoning_tokens=thoughts, cached_tokens=int(data.get("cached_content_token_count") or 0))


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


class GeminiStreamAssembler:
    """Turns Gemini response chunks (as dicts, snake_case) into deltas and the final reply;
    a whole reply is one chunk."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.thoughts: list[str] = []
        self.calls: list[ToolCall] = []
        self.signatures: list[dict[str, Any]] = []
        self.results: list[dict[str, Any]] = []
        self.usage: Usage | None = None
        self.finish: str | None = None
        self.model: str | None = None
        self._code: list[dict[str, Any]] = []

    def feed(self, chunk: Mapping[str, Any]) -> list[StreamDelta]:
        out: list[StreamDelta] = []
        if chunk.get("model_version"):
            self.model = str(chunk["model_version"])
        if chunk.get("usage_metadata"):
            self.usage = _usage(chunk["usage_metadata"])
        candidates = chunk.get("candidates") or []
        if not candidates:
            blocked = (chunk.get("prompt_feedback") or {}).get("block_reason")
            if blocked:
                self.finish = "content_filter"
            return out
        candidate = candidates[0]
        for part in (candidate.get("content") or {}).get("parts") or ():
            out.extend(self._part(part))
        for source in (candidate.get("grounding_metadata") or {}).get("grounding_chunks") or ():
            web = source.get("web") if isinstance(source, Mapping) else None
            if isinstance(web, Mapping) and web.get("uri"):
                self.results.append(ProviderWebSearchResult(url=str(web["uri"]), title=web.get("title")).to_dict())
        reason = candidate.get("finish_reason")
        if reason:
            self.finish = _FINISH.get(str(reason), str(reason).lower())
        return out

    def _part(self, part: Mapping[str, Any]) -> list[StreamDelta]:
        signature = _standard_b64(part.get("thought_signature"))
        if part.get("function_call"):
            call = part["function_call"]
            made = ToolCall(id=str(call.get("id") or _new_call_id()), name=str(call.get("name") or ""),
                            arguments=json.dumps(call.get("args") or {}))
            self.calls.append(made)
            if signature:
                self.signatures.append({"type": SIGNATURE_BLOCK, "call_id": made.id, "signature": str(signature)})
            return [ToolCallDelta(index=len(self.calls) - 1, id=made.id, name=made.name, arguments=made.arguments)]
        if signature and not any(s["call_id"] is None for s in self.signatures):
            self.signatures.append({"type": SIGNATURE_BLOCK, "call_id": None, "signature": str(signature)})
        text = part.get("text")
        if isinstance(text, str) and text:
            if part.get("thought"):
                self.thoughts.append(text)
                return [ReasoningDelta(text)]
            self.text.append(text)
            return [TextDelta(text)]
        if part.get("inline_data"):
            data = part["inline_data"]
            self.results.append(ProviderGeneratedImage(mime_type=str(data.get("mime_type") or "application/octet-stream"),
                                                       data=data.get("data")).to_dict())
        elif part.get("executable_code"):
            self._code.append(part["executable_code"])
        elif part.get("code_execution_result"):
            ran = part["code_execution_result"]
            code = self._code.pop(0) if self._code else {}
            self.results.append(ProviderExecutedToolResult(
                name="code_execution", input=code.get("code"), output=ran.get("output"),
                status="success" if ran.get("outcome") in (None, "OUTCOME_OK") else "error").to_dict())
        return []

    def response(self) -> ModelResponse:
        finish = self.finish
        if finish == "stop" and self.calls:
            finish = "tool_calls"
        metadata: dict[str, Any] = {PROVIDER_RESULTS_KEY: self.results} if self.results else {}
        return ModelResponse(text="".join(self.text), tool_calls=list(self.calls),
                             reasoning="".join(self.thoughts) or None, usage=self.usage, finish_reason=finish,
                             model=self.model, thinking_blocks=list(self.signatures), metadata=metadata)


def from_gemini_response(data: Mapping[str, Any]) -> ModelResponse:
    """A whole ``GenerateContentResponse`` (as a snake_case dict) as a :class:`ModelResponse`."""
    assembler = GeminiStreamAssembler()
    assembler.feed(data)
    response = assembler.response()
    response.raw = dict(data)
    return response


# -- the provider -------------------------------------------------------------------------

def _sdk() -> Any:
    try:
        from google import genai
    except ImportError as exc:
        raise ProviderError("the Gemini provider needs the google-genai package: pip install 'standardagents[gemini]'",
                            code="missing_dependency") from exc
    return genai


def _dump(item: Any) -> dict[str, Any]:
    if isinstance(item, Mapping):
        return dict(item)
    dumped: dict[str, Any] = item.model_dump(mode="json", exclude_none=True, exclude={"sdk_http_response"})
    return dumped


async def _close_quietly(chunks: Any) -> None:
    close = getattr(chunks, "aclose", None)
    if close is None:
        return
    try:
        await close()
    except RuntimeError:  # the SDK's generator may still be unwinding its own failure
        pass


class GeminiProvider(ModelProvider):
    """Gemini models through ``google-genai``'s async client.

    ``base_url`` points the SDK elsewhere (a proxy, or the test stub); ``max_retries`` are
    the SDK's, for 408/429/5xx answers and lost connections before the reply starts.
    """

    name = "gemini"

    def __init__(self, api_key: str, base_url: str | None = None, *, api_version: str = DEFAULT_API_VERSION,
                 timeout: float = 60.0, max_retries: int = 2, headers: Mapping[str, str] | None = None,
                 http_client: httpx2.AsyncClient | None = None) -> None:
        genai = _sdk()
        from google.genai import errors, types

        self._errors = errors
        self._args: dict[str, Any] = {"api_key": api_key, "base_url": base_url, "api_version": api_version,
                                      "timeout": timeout, "max_retries": max_retries, "headers": dict(headers or {})}
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx2.AsyncClient(
            timeout=httpx2.Timeout(timeout, connect=min(timeout, 10.0)))
        options: dict[str, Any] = {"api_version": api_version, "timeout": int(timeout * 1000),
                                   "httpx_async_client": self._http}
        if base_url:
            options["base_url"] = base_url
        if headers:
            options["headers"] = dict(headers)
        if max_retries > 0:
            options["retry_options"] = types.HttpRetryOptions(attempts=max_retries + 1,
                                                              http_status_codes=[*_RETRY_STATUSES, 500, 502, 503, 504])
        self.client = genai.Client(api_key=api_key, http_options=types.HttpOptions(**options))

    def _call(self, request: ModelRequest) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        system, contents = to_gemini_contents(request.messages)
        if not contents:
            contents = [{"role": "user", "parts": [{"text": ""}]}]
        return contents, to_gemini_config(request, system)

    def _error(self, exc: BaseException, first_token: bool, in_stream: bool) -> ProviderError:
        errors = self._errors
        if isinstance(exc, errors.APIError):
            status = int(exc.code or 500)
            kind = exc.status or ""
            detail = exc.message or str(exc)
            retriable = status in _RETRY_STATUSES or status >= 500
            if in_stream:
                return ProviderError(f"Gemini stream failed with {status} {kind}: {detail}", status=status,
                                     body=exc.details, retriable=retriable, code="stream_error",
                                     before_first_token=first_token)
            hint = {401: " (check the API key)", 403: " (check the API key)",
                    404: " (check the model name)"}.get(status, "")
            return ProviderError(f"Gemini answered HTTP {status} {kind}{hint}: {detail}", status=status,
                                 body=exc.details, retriable=retriable, code=f"http_{status}",
                                 before_first_token=first_token)
        if isinstance(exc, httpx2.TimeoutException):
            return ProviderError("Gemini request timed out", retriable=True, code="timeout",
                                 before_first_token=first_token)
        if isinstance(exc, httpx2.TransportError):
            return ProviderError(f"connection to Gemini failed: {exc}", retriable=True, code="connection",
                                 before_first_token=first_token)
        return ProviderError(f"Gemini sent a reply that could not be read: {exc}", code="invalid_response",
                             before_first_token=first_token)

    def _caught(self) -> tuple[type[BaseException], ...]:
        return (self._errors.APIError, self._errors.UnknownApiResponseError, httpx2.TransportError)

    async def request(self, request: ModelRequest) -> ModelResponse:
        contents, config = self._call(request)
        try:
            reply = await self.client.aio.models.generate_content(model=request.model, contents=contents, config=config)
        except self._caught() as exc:
            raise self._error(exc, True, False) from exc
        return from_gemini_response(_dump(reply))

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta]:
        contents, config = self._call(request)
        assembler = GeminiStreamAssembler()
        delivered = False
        started = False
        chunks: Any = None
        try:
            chunks = await self.client.aio.models.generate_content_stream(model=request.model, contents=contents,
                                                                          config=config)
            started = True
            async for chunk in chunks:
                for delta in assembler.feed(_dump(chunk)):
                    delivered = True
                    yield delta
        except self._caught() as exc:
            raise self._error(exc, not delivered, started) from exc
        finally:  # also when the consumer stops early or the stream failed: give the connection back
            if chunks is not None:
                await _close_quietly(chunks)
        yield StreamEnd(assembler.response())

    async def inspect_request(self, request: ModelRequest, *, stream: bool) -> Any:
        """The request this provider would send for ``request``, captured before it leaves."""
        from .inspect import capture_request

        args = self._args
        return await capture_request(
            lambda http: GeminiProvider(args["api_key"], args["base_url"], api_version=args["api_version"],
                                        timeout=args["timeout"], max_retries=0, headers=args["headers"],
                                        http_client=http),
            request, stream=stream, provider="gemini", secrets=[args["api_key"]])

    async def aclose(self) -> None:
        await self.client.aio.aclose()
        if self._owns_http:
            await self._http.aclose()


# -- the definition -----------------------------------------------------------------------

def _make(config: ProviderFactoryConfig) -> GeminiProvider:
    return GeminiProvider(config["api_key"], config.get("base_url"),
                          api_version=config.get("api_version", DEFAULT_API_VERSION),
                          timeout=config.timeout, max_retries=config.max_retries, headers=config.headers)


_LONG = 1_048_576
_THINKS: list[ReasoningLevel] = ["none", "minimal", "low", "medium", "high"]

gemini = define_provider(
    name="gemini",
    description="Google Gemini through its native generateContent API (the google-genai SDK)",
    config={
        "api_key": provider_env("GEMINI_API_KEY", "GOOGLE_API_KEY", description="a Gemini API key"),
        "base_url": provider_env("GEMINI_BASE_URL", required=False, description="another endpoint (a proxy)"),
        "api_version": provider_const(DEFAULT_API_VERSION),
    },
    factory=_make,
    models=[
        {"id": "gemini-2.5-pro", "name": "Gemini 2.5 Pro",
         "capabilities": {"vision": True, "structured_output": True, "reasoning_levels": _THINKS[2:],
                          "context_window": _LONG, "max_output_tokens": 65_536},
         "prices": {"input": 1.25, "output": 10.0, "cached_input": 0.31}},
        {"id": "gemini-2.5-flash", "name": "Gemini 2.5 Flash",
         "capabilities": {"vision": True, "structured_output": True, "reasoning_levels": _THINKS,
                          "context_window": _LONG, "max_output_tokens": 65_536},
         "prices": {"input": 0.30, "output": 2.50, "cached_input": 0.075}},
        {"id": "gemini-2.5-flash-lite", "name": "Gemini 2.5 Flash-Lite",
         "capabilities": {"vision": True, "structured_output": True, "reasoning_levels": _THINKS,
                          "context_window": _LONG, "max_output_tokens": 65_536},
         "prices": {"input": 0.10, "output": 0.40, "cached_input": 0.025}},
        {"id": "gemini-2.0-flash", "name": "Gemini 2.0 Flash",
         "capabilities": {"vision": True, "structured_output": True, "context_window": _LONG,
                          "max_output_tokens": 8_192},
         "prices": {"input": 0.10, "output": 0.40, "cached_input": 0.025}},
    ],
)
