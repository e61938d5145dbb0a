"""The providers' HTTP client: aiohttp, whose response parser is compiled.

A model call's client-side CPU was mostly the HTTP stack (httpx2, httpcore2 and h11 parse
every response and every chunk in pure Python): the same request through aiohttp costs about
half. The SDKs stay where users see them (``provider.client``): their headers (keys,
organisation, version, user agent) are sent as they are, and the providers turn status codes
and failures into the same errors as before.

What the SDKs' default clients did is kept: a verifying TLS context, connect and read
timeouts (a request's own timeout replaces the client's), redirects followed, proxies from
``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY`` (read once per endpoint URL, as httpx2 read them
once per client: aiohttp's ``trust_env`` would look them and ``.netrc`` up in a thread on
every request, and a ``.netrc`` entry would clash with the key's header), one connection
pool without a cap whose idle connections are kept for 30 s, and a cancelled call closing
its connection. The session is made on first use in the running event loop (aiohttp binds
it to one).
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import httpx2
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

__all__ = ["HTTPClient", "HTTPReply", "SDKReply", "TransportFailure", "ssl_context"]

_KEEPALIVE_SECONDS = 30.0
_CONNECT_CAP = 10.0


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """One verifying TLS context per process: loading CA certificates costs ~25 ms each time."""
    return httpx2.create_ssl_context()


class TransportFailure(Exception):
    """A request that got no complete answer: it timed out, or its connection failed."""

    def __init__(self, detail: str, *, timeout: bool) -> None:
        super().__init__(detail)
        self.timeout = timeout


def _failure(exc: BaseException) -> TransportFailure:
    timed_out = isinstance(exc, TimeoutError | aiohttp.ServerTimeoutError)
    return TransportFailure(str(exc) or type(exc).__name__, timeout=timed_out)


#: what aiohttp raises for a request or a body that failed (not a status code)
_FAILURES = (aiohttp.ClientError, TimeoutError, OSError)


class HTTPReply:
    """One response: its status and headers, then its body whole or chunk by chunk.

    Reading it raises :class:`TransportFailure` when the connection fails or stalls past the
    read timeout; :meth:`aclose` gives a fully read connection back to the pool and closes one
    left unread.
    """

    __slots__ = ("_response", "headers", "status")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status = response.status
        self.headers: Mapping[str, str] = response.headers

    async def read(self) -> bytes:
        try:
            return await self._response.read()
        except _FAILURES as exc:
            raise _failure(exc) from exc

    async def text(self) -> str:
        return (await self.read()).decode("utf-8", errors="replace")

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        content = self._response.content
        while True:
            try:
                chunk = await content.readany()
            except _FAILURES as exc:
                raise _failure(exc) from exc
            if not chunk:
                return
            yield chunk

    async def aclose(self) -> None:
        response = self._response
        if response.content.at_eof():
            response.release()  # read to its end: the connection goes back to the pool
        else:  # left unread: the connection is closed, and the server sees it now: the
            response.close()  # transport closes its socket on the loop's next turn, so give it one
            await asyncio.sleep(0)


def _proxy_options(url: str) -> dict[str, Any]:
    """The proxy the environment names for ``url`` (none when ``NO_PROXY`` covers it)."""
    try:
        proxy, auth = get_env_proxy_for_url(URL(url))
    except LookupError:
        return {}
    return {"proxy": proxy, "proxy_auth": auth}


class HTTPClient:
    """POSTs prepared JSON bodies to one endpoint's URLs with fixed headers."""

    def __init__(self, headers: Mapping[str, object], timeout: float) -> None:
        self.headers = {k: v for k, v in headers.items() if isinstance(v, str)}
        self.timeout = timeout
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}
        self._proxies: dict[str, dict[str, Any]] = {}
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _timeout(self, seconds: float) -> aiohttp.ClientTimeout:
        found = self._timeouts.get(seconds)
        if found is None:
            found = self._timeouts[seconds] = aiohttp.ClientTimeout(
                total=None, connect=min(seconds, _CONNECT_CAP), sock_read=seconds)
        return found

    def _session_here(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._session
        if session is None or session.closed or self._loop is not loop:
            connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, ssl=ssl_context(),
                                             keepalive_timeout=_KEEPALIVE_SECONDS)
            session = self._session = aiohttp.ClientSession(
                connector=connector, timeout=self._timeout(self.timeout), headers=self.headers,
                cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=True)
            self._loop = loop
        return session

    async def post(self, url: str, body: bytes, *, read_timeout: float | None = None,
                   headers: Mapping[str, str] | None = None) -> HTTPReply:
        """Send ``body`` and wait for the status and headers (the body is read later);
        ``read_timeout`` replaces the client's timeout for this request."""
        proxy = self._proxies.get(url)
        if proxy is None:
            proxy = self._proxies[url] = _proxy_options(url)
        options = dict(proxy)
        if headers:  # the session's own headers go with every request
            options["headers"] = headers
        if read_timeout is not None:
            options["timeout"] = self._timeout(read_timeout)
        try:
            response = await self._session_here().post(url, data=body, **options)
        except _FAILURES as exc:
            raise _failure(exc) from exc
        return HTTPReply(response)

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()


class SDKReply:
    """A response the SDK's own httpx2 client got (when the caller supplied that client), read
    through the same interface as :class:`HTTPReply`."""

    __slots__ = ("_response", "headers", "status")

    def __init__(self, response: httpx2.Response) -> None:
        self._response = response
        self.status = response.status_code
        self.headers: Mapping[str, str] = response.headers

    async def read(self) -> bytes:
        try:
            return await self._response.aread()
        except httpx2.TransportError as exc:
            raise TransportFailure(str(exc) or type(exc).__name__,
                                   timeout=isinstance(exc, httpx2.TimeoutException)) from exc

    async def text(self) -> str:
        return (await self.read()).decode("utf-8", errors="replace")

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        chunks = self._response.aiter_bytes()
        while True:
            try:
                chunk = await anext(chunks, None)
            except httpx2.TransportError as exc:
                raise TransportFailure(str(exc) or type(exc).__name__,
                                       timeout=isinstance(exc, httpx2.TimeoutException)) from exc
            if chunk is None:
                return
            yield chunk

    async def aclose(self) -> None:
        await self._response.aclose()
