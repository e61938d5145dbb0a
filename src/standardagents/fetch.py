"""The ``fetch`` the runtime gives a tool that declares ``network`` (the spec's ``CreateFetch``
and ``FetchLike``).

A tool's HTTP goes through here so an operator can rely on what the tool declared: only its
allowed hosts are reached (redirects included), each request has a timeout, a response body
larger than the limit is refused rather than read, every request is logged in the thread's
logs (the URL with its query values hidden) and traced when tracing is on, and a credential
grant named for the host is attached by the runtime, so the tool's code, the model, messages,
events and logs never see the secret.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

import httpx2 as httpx

from .exceptions import StandardAgentsError

if TYPE_CHECKING:
    from .definitions.variables import NetworkPolicy
    from .engine.state import ThreadState

__all__ = ["CreateFetch", "FetchError", "FetchLike", "FetchResponse", "create_fetch", "redact_url"]

log = logging.getLogger("standardagents.fetch")


class FetchError(StandardAgentsError):
    """A tool's request was refused (a host it may not reach, a body over the limit) or
    failed (timeout, connection); raised inside the tool, its message becomes the tool's
    error result."""


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """A response read whole (within the limit). It carries no request headers, so a
    credential the runtime attached cannot be read back from it."""

    status_code: int
    url: str
    headers: Mapping[str, str]
    content: bytes = field(repr=False)

    @property
    def ok(self) -> bool:
        return 200 <= self.status_code < 400

    @property
    def text(self) -> str:
        return self.content.decode(_charset(self.headers) or "utf-8", errors="replace")

    def json(self) -> Any:
        import json

        return json.loads(self.content)


class FetchLike(Protocol):
    """What ``state.fetch`` is: ``await state.fetch(url, method=..., headers=..., params=...,
    json=..., content=...)``."""

    def __call__(self, url: str, *, method: str = "GET", headers: Mapping[str, str] | None = None,
                 params: Mapping[str, Any] | None = None, json: Any = None, content: bytes | str | None = None,
                 timeout: float | None = None) -> Awaitable[FetchResponse]: ...


#: makes the fetch of one tool call (the spec's ``CreateFetch``)
CreateFetch = Callable[["ThreadState", str, "NetworkPolicy"], FetchLike]


def _charset(headers: Mapping[str, str]) -> str | None:
    kind = headers.get("content-type", "")
    for part in kind.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset" and value:
            return value.strip('"')
    return None


def redact_url(url: str) -> str:
    """``url`` with its query values and any user info replaced, for logs and traces."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    query = urlencode([(k, "***") for k, _ in parse_qsl(parts.query, keep_blank_values=True)], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def _split(entry: str) -> tuple[str, str]:
    """An ``allow`` entry as (host, port or "")."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, rest[1:]
    host, _, port = entry.partition(":")
    return host, port


def _host_allowed(policy: NetworkPolicy, host: str, port: int | None) -> str | None:
    """The ``allow`` entry that lets ``host:port`` through, or ``None``."""
    host = host.lower()
    for entry in policy.allow:
        name, want_port = _split(entry)
        if want_port and str(port) != want_port:
            continue
        if name.startswith("*."):
            if host.endswith(name[1:]):
                return entry
        elif host == name:
            return entry
    return None


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One verifying TLS context for every fetch (building one per client is the slow part)."""
    return httpx.create_ssl_context()


def create_fetch(state: ThreadState, tool: str, policy: NetworkPolicy) -> FetchLike:
    """The ``fetch`` of one call of ``tool`` on ``state``'s thread, held to ``policy``."""

    async def fetch(url: str, *, method: str = "GET", headers: Mapping[str, str] | None = None,
                    params: Mapping[str, Any] | None = None, json: Any = None, content: bytes | str | None = None,
                    timeout: float | None = None) -> FetchResponse:  # noqa: ASYNC109 (capped by the policy)
        limit = min(timeout, policy.timeout) if timeout else policy.timeout
        request_headers = {str(k): str(v) for k, v in (headers or {}).items()}
        current = str(httpx.URL(url, params=params)) if params else url
        started = time.perf_counter()
        async with httpx.AsyncClient(verify=_ssl_context(), timeout=httpx.Timeout(limit), follow_redirects=False,
                                     trust_env=False) as client:
            for _hop in range(policy.max_redirects + 1):
                target = httpx.URL(current)
                if target.scheme not in ("http", "https"):
                    raise FetchError(f"tool {tool!r} may fetch only http(s) URLs, not {redact_url(current)!r}")
                entry = _host_allowed(policy, target.host, target.port)
                if entry is None:
                    raise FetchError(f"tool {tool!r} may not fetch from {target.host!r}"
                                     f"{f' port {target.port}' if target.port else ''}: its network allows "
                                     f"{', '.join(policy.allow)}")
                sent = dict(request_headers)
                grant = policy.credentials.get(entry)
                if grant is not None:
                    from .credentials import use_credential

                    credential = await use_credential(state, grant.grant, scope=grant.scope)
                    sent[grant.header] = f"{grant.scheme} {credential.secret}" if grant.scheme else credential.secret
                response = await _send(client, tool, method, current, sent, json, content, limit, policy.max_bytes)
                if response.status_code in (301, 302, 303, 307, 308) and "location" in response.headers:
                    current = urljoin(current, response.headers["location"])
                    if response.status_code == 303 or (response.status_code in (301, 302) and method != "HEAD"):
                        method, json, content = ("GET" if method != "HEAD" else method), None, None
                    continue
                break
            else:
                raise FetchError(f"tool {tool!r}: more than {policy.max_redirects} redirects from {redact_url(url)}")
        await _record(state, tool, method, current, response, time.perf_counter() - started)
        return response

    return fetch


async def _send(client: httpx.AsyncClient, tool: str, method: str, url: str, headers: dict[str, str], json: Any,
                content: bytes | str | None, limit: float, max_bytes: int) -> FetchResponse:
    from .observability import tracing

    tracer = tracing.tracer()
    with contextlib.ExitStack() as stack:
        span = None if tracer is None else stack.enter_context(tracer.start_as_current_span(
            f"fetch {method}", attributes={"http.request.method": method, "url.full": redact_url(url),
                                           "standardagents.tool.name": tool}))
        try:
            async with asyncio.timeout(limit):  # the whole exchange, not only each read
                async with client.stream(method, url, headers=headers, json=json, content=content) as raw:
                    declared = raw.headers.get("content-length")
                    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
                        raise FetchError(f"tool {tool!r}: the response from {redact_url(url)} is {declared} bytes, "
                                         f"over its limit of {max_bytes}")
                    body = bytearray()
                    async for chunk in raw.aiter_bytes():
                        body += chunk
                        if len(body) > max_bytes:
                            raise FetchError(f"tool {tool!r}: the response from {redact_url(url)} is over its limit "
                                             f"of {max_bytes} bytes")
                    response = FetchResponse(raw.status_code, str(raw.url), dict(raw.headers), bytes(body))
        except TimeoutError:
            raise FetchError(f"tool {tool!r}: {method} {redact_url(url)} timed out after {limit} s") from None
        except httpx.HTTPError as exc:
            raise FetchError(f"tool {tool!r}: {method} {redact_url(url)} failed: {type(exc).__name__}") from None
        if span is not None:
            span.set_attribute("http.response.status_code", response.status_code)
        return response


async def _record(state: ThreadState, tool: str, method: str, url: str, response: FetchResponse, seconds: float) -> None:
    shown = redact_url(url)
    text = f"tool {tool} fetched {method} {shown}: {response.status_code} ({len(response.content)} bytes)"
    log.info("thread %s: %s", state.thread_id, text)
    await state.log(text, data={"tool": tool, "method": method, "url": shown, "status": response.status_code,
                                "bytes": len(response.content), "durationMs": round(seconds * 1000, 1)})
