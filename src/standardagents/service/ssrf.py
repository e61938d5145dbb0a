"""Refusing webhook URLs that reach inside the deployment (server-side request forgery).

A URL whose host resolves to a private, loopback, link-local, multicast, reserved or
unspecified address is refused unless ``STANDARDAGENTS_WEBHOOKS_ALLOW_PRIVATE=1``. The check
runs when a subscription is made and again before each delivery (a name may resolve
elsewhere later).
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
from urllib.parse import urlsplit

from ..exceptions import DefinitionError

__all__ = ["ALLOW_PRIVATE_ENV", "check_url", "check_url_shape", "private_allowed"]

ALLOW_PRIVATE_ENV = "STANDARDAGENTS_WEBHOOKS_ALLOW_PRIVATE"


def private_allowed() -> bool:
    return os.environ.get(ALLOW_PRIVATE_ENV, "").lower() in ("1", "true", "yes")


def check_url_shape(url: str) -> tuple[str, int]:
    """The URL's host and port; a :class:`DefinitionError` naming the problem when it is no
    absolute http(s) URL."""
    if not isinstance(url, str) or not url:
        raise DefinitionError("field 'url' must be an http(s) URL")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DefinitionError(f"field 'url': {url[:200]!r} is not an absolute http(s) URL")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise DefinitionError(f"field 'url': {url[:200]!r} has a bad port ({exc})") from None
    return parts.hostname, port


def _internal(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return (ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_reserved
            or ip.is_unspecified)


async def check_url(url: str) -> None:
    """Raise :class:`DefinitionError` when ``url`` is malformed, does not resolve, or (unless
    private addresses are allowed) resolves to an internal address."""
    host, port = check_url_shape(url)
    if private_allowed():
        return
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise DefinitionError(f"field 'url': the host {host!r} does not resolve ({exc.strerror or exc})") from None
    for info in infos:
        address = str(info[4][0])
        if _internal(address):
            raise DefinitionError(
                f"field 'url': {host!r} resolves to the internal address {address}; webhooks go to public "
                f"addresses only (set {ALLOW_PRIVATE_ENV}=1 to allow private ones)")
