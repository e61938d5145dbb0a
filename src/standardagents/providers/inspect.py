"""Showing the exact request a model call would send, without sending it.

The provider is built as for a real call, but over an HTTP client whose transport keeps the
request and refuses to send it; whatever the SDK assembled (URL, headers, JSON body) is
returned as an :class:`InspectedRequest`, with credentials redacted: the authorization
headers every built-in API uses, and every secret value of the provider's configuration
wherever it appears. Providers that ``extends`` a built-in are inspected the same way; a
provider of your own shows its requests when its instance has an ``inspect_request`` method
(:func:`capture_request` does the work for anything speaking HTTP through ``httpx2``).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx2

from ..definitions.model import ModelDefinition
from ..exceptions import ProviderError
from .base import ModelProvider, ModelRequest

__all__ = ["REDACTED_HEADERS", "InspectedRequest", "capture_request", "inspect_request", "request_for"]

#: headers whose value is a credential in the APIs the runtime speaks
REDACTED_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key",
                              "cookie"})
_REDACTED = "[redacted]"


@dataclass(slots=True)
class InspectedRequest:
    """A request as it would leave: method, URL, headers (credentials redacted) and body."""

    provider: str
    model: str
    method: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    stream: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"provider": self.provider, "model": self.model, "method": self.method, "url": self.url,
                "headers": dict(self.headers), "body": self.body, "stream": self.stream}


class _Held(Exception):
    """Raised by the capturing transport: the request was kept, not sent."""


class _Capture(httpx2.AsyncBaseTransport):
    def __init__(self) -> None:
        self.request: httpx2.Request | None = None

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        await request.aread()
        if self.request is None:
            self.request = request
        raise _Held("request held for inspection")


def _scrub(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        for item in secrets:
            value = value.replace(item, _REDACTED)
        return value
    if isinstance(value, Mapping):
        return {k: _scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, secrets) for v in value]
    return value


def _shown(request: httpx2.Request, *, provider: str, model: str, stream: bool, secrets: list[str]) -> InspectedRequest:
    secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
    headers = {k: (_REDACTED if k.lower() in REDACTED_HEADERS else _scrub(v, secrets))
               for k, v in request.headers.items()}
    raw = request.content
    try:
        body: Any = json.loads(raw) if raw else None
    except ValueError:
        body = raw.decode("utf-8", "replace")
    return InspectedRequest(provider=provider, model=model, method=request.method,
                            url=_scrub(str(request.url), secrets), headers=headers, body=_scrub(body, secrets),
                            stream=stream)


async def capture_request(make: Callable[[httpx2.AsyncClient], ModelProvider], request: ModelRequest, *,
                          stream: bool, provider: str, secrets: list[str] | None = None) -> InspectedRequest:
    """Build a provider with ``make(client)``, let it make ``request`` over ``client``, and
    return what it would have sent. A provider that fails before sending raises its error;
    one that never used ``client`` is an error too (it would have sent the request elsewhere)."""
    capture = _Capture()
    client = httpx2.AsyncClient(transport=capture)
    made: ModelProvider | None = None
    failure: BaseException | None = None
    try:
        made = make(client)
        if stream:
            async for _ in made.stream(request):
                break
        else:
            await made.request(request)
    except Exception as exc:
        failure = exc
    finally:
        if made is not None:
            await made.aclose()
        await client.aclose()
    if capture.request is None:
        if failure is not None:
            raise failure
        raise ProviderError(f"provider {provider!r} did not send its request through the client it was given, "
                            "so it cannot be shown", code="not_inspectable")
    return _shown(capture.request, provider=provider, model=request.model, stream=stream, secrets=secrets or [])


def request_for(model: ModelDefinition, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                **fields: Any) -> ModelRequest:
    """The request the engine makes of ``model`` for ``messages`` (before any hook)."""
    request = ModelRequest(model=model.model, messages=messages, tools=list(tools or []),
                           max_tokens=model.max_tokens, temperature=model.temperature, top_p=model.top_p,
                           extra_body=dict(model.extra_body), timeout=model.timeout, reasoning=model.reasoning)
    for name, value in fields.items():
        setattr(request, name, value)
    return request


async def inspect_request(model: ModelDefinition, messages: list[dict[str, Any]] | ModelRequest, *,
                          tools: list[dict[str, Any]] | None = None, stream: bool | None = None,
                          values: Mapping[str, Any] | None = None) -> InspectedRequest:
    """The exact HTTP request a call of ``model`` with ``messages`` would send, unsent.

    ``messages`` may be a whole :class:`ModelRequest` instead; ``stream`` defaults to the
    model's ``stream``; ``values`` supplies a defined provider's runtime values for this call.
    The model's key is read from its ``api_key_env`` as for a real call, and redacted.
    """
    from .defined import DefinedProvider, build_defined, definition_for, resolve_config
    from .factory import ProviderSpec, build_provider

    request = messages if isinstance(messages, ModelRequest) else request_for(model, messages, tools=tools)
    streams = model.stream if stream is None else stream
    api_key = os.environ.get(model.api_key_env) if model.api_key_env else None
    spec = ProviderSpec(provider=model.provider, base_url=model.base_url, api_key=api_key,
                        api_key_env=model.api_key_env if api_key else None, timeout=model.timeout or 60.0,
                        max_retries=0, headers=dict(model.headers), options=dict(model.options))
    if model.provider == "test":
        raise ProviderError("the offline test model sends no HTTP request", code="not_inspectable")
    definition = definition_for(model.provider)
    if definition is None:
        return await capture_request(
            lambda http: build_provider(dataclasses.replace(spec, options={**spec.options, "http_client": http})),
            request, stream=streams, provider=model.provider, secrets=[api_key or ""])
    secrets = [*resolve_config(definition, values=values, spec=spec).secret_values(), api_key or ""]
    if definition.extends is not None:
        return await capture_request(lambda http: build_defined(definition, spec, values=values, http_client=http),
                                     request, stream=streams, provider=model.provider, secrets=secrets)
    made = build_defined(definition, spec, values=values)
    try:
        inner, prepared = made, request
        if isinstance(made, DefinedProvider):
            inner, prepared = made.inner, await made.prepared(request, streams)
        show = getattr(inner, "inspect_request", None)
        if show is None:
            raise ProviderError(f"provider {model.provider!r} cannot show its requests: its instance "
                                f"({type(inner).__name__}) has no inspect_request method", code="not_inspectable")
        shown = await show(prepared, stream=streams)
    finally:
        await made.aclose()
    shown.provider = model.provider
    shown.headers = {k: _scrub(v, sorted(set(filter(None, secrets)), key=len, reverse=True)) for k, v in shown.headers.items()}
    return shown

