"""The model-provider seam: one small abstract class every provider implements.

A provider turns a :class:`ModelRequest` (chat-completions shaped messages and tools) into
either one :class:`ModelResponse` or a stream of deltas ending with a
:class:`StreamEnd` that carries the assembled response. The engine never looks at a
provider's SDK types, so a new provider is a new file here and nothing else changes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from ..definitions.reasoning import ReasoningConfig
from ..records import ToolCall, Usage

__all__ = [
    "PROVIDER_RESULTS_KEY",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "ProviderExecutedToolResult",
    "ProviderGeneratedImage",
    "ProviderResult",
    "ProviderWebSearchResult",
    "ReasoningDelta",
    "StreamDelta",
    "StreamEnd",
    "TextDelta",
    "ToolCallDelta",
]


@dataclass(slots=True)
class ModelRequest:
    """What the engine asks a model for.

    ``messages`` are chat-completions dicts (``role``, ``content``, ``tool_calls``,
    ``tool_call_id``, ``name``); ``tools`` are ``{"type": "function", "function":
    {name, description, parameters}}`` dicts. ``extra_body`` is passed through verbatim.
    ``response_format`` asks for structured output (chat-completions shape); providers
    without it leave it out.
    """

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: str | dict[str, Any] | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: list[str] | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    timeout: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    response_format: dict[str, Any] | None = None
    #: False: at most one tool call per reply (None: the endpoint's default, parallel allowed)
    parallel_tool_calls: bool | None = None
    #: how hard to think (the model definition's ``reasoning``); each provider maps it to its
    #: own parameter, and leaves it out when None
    reasoning: ReasoningConfig | None = None

    def __post_init__(self) -> None:
        if self.reasoning is None:  # a model definition's body carries its reasoning setting
            self.reasoning = getattr(self.extra_body, "reasoning", None)


@dataclass(slots=True)
class ModelResponse:
    """One complete model reply."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    model: str | None = None
    raw: Any = None
    #: blocks the provider must get back verbatim with this reply when the conversation goes
    #: on (Anthropic's signed ``thinking`` and ``redacted_thinking`` blocks), in reply order
    thinking_blocks: list[dict[str, Any]] = field(default_factory=list)
    #: values for the reply message's metadata, under their own keys (the results of tools
    #: the provider ran itself go under :data:`PROVIDER_RESULTS_KEY`, as dicts)
    metadata: dict[str, Any] = field(default_factory=dict)


#: the message metadata key holding the provider-executed results of a reply
PROVIDER_RESULTS_KEY = "providerResults"


@dataclass(slots=True)
class ProviderWebSearchResult:
    """A page a provider's own web search found and grounded the reply in."""

    url: str
    title: str | None = None
    snippet: str | None = None
    type: Literal["web_search"] = "web_search"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "url": self.url, "title": self.title, "snippet": self.snippet}


@dataclass(slots=True)
class ProviderGeneratedImage:
    """An image the model generated as part of its reply (base64 data, or a URL)."""

    mime_type: str
    data: str | None = None
    url: str | None = None
    type: Literal["image"] = "image"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "mimeType": self.mime_type, "data": self.data, "url": self.url}


@dataclass(slots=True)
class ProviderExecutedToolResult:
    """A tool the provider ran on its side (code execution, a hosted search): what it was
    given and what it returned; the engine neither runs nor answers it."""

    name: str
    input: Any = None
    output: Any = None
    status: Literal["success", "error"] = "success"
    id: str | None = None
    type: Literal["tool_result"] = "tool_result"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "id": self.id, "name": self.name, "input": self.input,
                "output": self.output, "status": self.status}


ProviderResult = ProviderWebSearchResult | ProviderGeneratedImage | ProviderExecutedToolResult


@dataclass(slots=True)
class TextDelta:
    """A piece of the reply's text."""

    text: str


@dataclass(slots=True)
class ReasoningDelta:
    """A piece of the model's reasoning (``reasoning_content`` and the like)."""

    text: str


@dataclass(slots=True)
class ToolCallDelta:
    """A piece of tool call number ``index``: ``id``/``name`` arrive once, arguments in parts."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(slots=True)
class StreamEnd:
    """The last item of every stream: the assembled response."""

    response: ModelResponse


StreamDelta = TextDelta | ReasoningDelta | ToolCallDelta | StreamEnd


class ModelProvider(ABC):
    """A model endpoint. Implementations raise :class:`~standardagents.exceptions.ProviderError`."""

    name: str = "provider"

    @abstractmethod
    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send one request and return the whole reply."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta]:
        """Stream the reply; the default sends one request and replays it as deltas."""
        response = await self.request(request)
        if response.reasoning:
            yield ReasoningDelta(response.reasoning)
        if response.text:
            yield TextDelta(response.text)
        for i, call in enumerate(response.tool_calls):
            yield ToolCallDelta(index=i, id=call.id, name=call.name, arguments=call.arguments)
        yield StreamEnd(response)

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the default has nothing to release."""
