"""Verifying an identity provider's JWTs against its published keys (PyJWT).

PyJWT does the cryptography; its ``PyJWKClient`` fetches the key set, caches it and refetches
when a token names a key it has not seen, at most once per cooldown, so a flood of made-up key
ids cannot hammer the provider. A refused token gets one reason; the token itself is never
logged nor echoed. Settings and the caller's :class:`~.oidc.Identity` live in :mod:`.oidc`.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

import jwt
from jwt import PyJWK, PyJWKClient

from ..exceptions import AuthenticationFailed
from .oidc import Identity, OidcSettings

__all__ = ["JwtVerifier"]

_KEY_TYPES = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}
#: a verified token is trusted this long without verifying it again (never past its expiry)
_TOKEN_CACHE_SECONDS = 5.0


def _fetch_json(url: str, timeout: float = 10.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


_REASONS: tuple[tuple[type[Exception], str], ...] = (
    (jwt.ExpiredSignatureError, "the token has expired"),
    (jwt.ImmatureSignatureError, "the token is not valid yet (its nbf or iat is in the future)"),
    (jwt.InvalidIssuerError, "the token was issued by another issuer"),
    (jwt.InvalidAudienceError, "the token was made for another audience"),
    (jwt.InvalidSignatureError, "the token's signature does not verify"),
    (jwt.InvalidIssuedAtError, "the token's iat claim is not a time"),
)


class JwtVerifier:
    """Verifies provider tokens and maps their claims to an :class:`Identity`."""

    def __init__(self, settings: OidcSettings) -> None:
        self.settings = settings.checked()
        self._client: PyJWKClient | None = None
        self._issuer_checked = False
        self._keys: dict[str, tuple[float, PyJWK]] = {}
        self._last_refetch = -float("inf")
        self._lock = asyncio.Lock()
        self._cache: dict[str, tuple[float, Identity]] = {}
        self.discovery: dict[str, Any] = {}

    async def discover(self) -> dict[str, Any]:
        """The issuer's discovery document (fetched once); empty without an issuer."""
        if self.settings.issuer and not self.discovery:
            url = self.settings.issuer.rstrip("/") + "/.well-known/openid-configuration"
            try:
                document = await asyncio.to_thread(_fetch_json, url)
            except Exception as exc:
                raise AuthenticationFailed(f"the identity provider's discovery document could not be read "
                                           f"({url}: {type(exc).__name__})") from None
            if not isinstance(document, dict) or document.get("issuer") != self.settings.issuer:
                raise AuthenticationFailed(f"the discovery document at {url} names another issuer")
            self.discovery = document
        return self.discovery

    async def _jwks_client(self) -> PyJWKClient:
        if self._client is None:
            url = self.settings.jwks_url
            if url is None:
                url = (await self.discover()).get("jwks_uri")
                if not isinstance(url, str) or not url:
                    raise AuthenticationFailed("the identity provider's discovery document names no jwks_uri")
            self._client = PyJWKClient(url, cache_jwk_set=True, lifespan=max(self.settings.jwks_lifespan, 0.001),
                                       cooldown_duration=0, timeout=10)
        return self._client

    async def _key(self, kid: str | None) -> PyJWK:
        now = time.monotonic()
        hit = self._keys.get(kid or "")
        if hit is not None and hit[0] > now:
            return hit[1]
        async with self._lock:
            client = await self._jwks_client()
            try:
                keys = await asyncio.to_thread(client.get_signing_keys)
                key = self._match(keys, kid)
                # a key id not seen yet: the provider may have rotated, so fetch the set again,
                # unless a new key id already made us fetch it within the cooldown
                if key is None and kid is not None and now - self._last_refetch >= self.settings.refetch_cooldown:
                    self._last_refetch = now
                    keys = await asyncio.to_thread(client.get_signing_keys, True)
                    key = self._match(keys, kid)
            except jwt.PyJWKClientConnectionError:
                raise AuthenticationFailed("the identity provider's key set could not be fetched") from None
            except (jwt.PyJWKClientError, jwt.PyJWKSetError):
                raise AuthenticationFailed("the identity provider's key set holds no usable key") from None
        if key is None:
            if kid is None:
                raise AuthenticationFailed("the token names no key (kid) and the provider publishes "
                                           f"{len(keys)} keys")
            raise AuthenticationFailed(f"the token was signed with an unknown key {kid!r}")
        self._keys[kid or ""] = (now + self.settings.jwks_lifespan, key)
        return key

    @staticmethod
    def _match(keys: list[PyJWK], kid: str | None) -> PyJWK | None:
        if kid is None:
            return keys[0] if len(keys) == 1 else None
        return next((k for k in keys if k.key_id == kid), None)

    async def verify(self, token: str) -> Identity:
        """The caller a token names, or :class:`AuthenticationFailed` with the one reason."""
        now = time.time()
        hit = self._cache.get(token)
        if hit is not None and hit[0] > now:
            return hit[1]
        settings = self.settings
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise AuthenticationFailed("the bearer token is not a well-formed JWT") from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg.lower() == "none":
            raise AuthenticationFailed("the token is unsigned (alg 'none'): refused")
        if alg not in settings.algorithms:
            raise AuthenticationFailed(f"the token's algorithm {alg!r} is not accepted "
                                       f"(accepted: {', '.join(settings.algorithms)})")
        kid = header.get("kid")
        key = await self._key(kid if isinstance(kid, str) else None)
        kty = _KEY_TYPES.get(alg[:2])
        if kty is not None and key.key_type != kty:
            raise AuthenticationFailed(f"the token's algorithm {alg!r} does not fit key {kid!r} (a {key.key_type} key)")
        if settings.issuer:
            await self.discover()
        try:
            claims = jwt.decode(token, key.key, algorithms=[alg], audience=settings.audience,
                                issuer=settings.issuer, leeway=settings.leeway,
                                options={"require": ["exp", settings.user_claim]})
        except jwt.MissingRequiredClaimError as exc:
            raise AuthenticationFailed(f"the token has no {exc.claim!r} claim") from None
        except jwt.PyJWTError as exc:
            for kind, reason in _REASONS:
                if isinstance(exc, kind):
                    raise AuthenticationFailed(reason) from None
            raise AuthenticationFailed(f"the token is not valid ({type(exc).__name__})") from None
        identity = self.identity(claims)
        expires = float(claims["exp"]) + settings.leeway
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[token] = (min(expires, now + _TOKEN_CACHE_SECONDS), identity)
        return identity

    def identity(self, claims: Mapping[str, Any]) -> Identity:
        """The caller verified ``claims`` describe, read through the configured claim names."""
        s = self.settings
        user_id = claims.get(s.user_claim)
        if not isinstance(user_id, str | int) or isinstance(user_id, bool) or not str(user_id):
            raise AuthenticationFailed(f"the token's {s.user_claim!r} claim is not a user id")
        raw_roles = claims.get(s.roles_claim)
        roles: Sequence[Any] = [raw_roles] if isinstance(raw_roles, str) else raw_roles if isinstance(raw_roles, list) else []
        is_admin = raw_roles is True or s.admin_value in roles
        name = claims.get(s.name_claim)
        email = claims.get(s.email_claim)
        tenant = claims.get(s.tenant_claim)
        return Identity(name=str(name) if isinstance(name, str) and name else str(user_id), id=str(user_id),
                        email=email if isinstance(email, str) else None, is_admin=is_admin,
                        tenant=str(tenant) if isinstance(tenant, str | int) and not isinstance(tenant, bool) else None,
                        roles=tuple(str(r) for r in roles if isinstance(r, str)), claims=dict(claims),
                        issuer=claims.get("iss") if isinstance(claims.get("iss"), str) else None)
