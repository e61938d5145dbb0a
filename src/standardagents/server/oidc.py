"""Bearer tokens from an identity provider: JWTs verified against the provider's published keys.

Settings come from ``STANDARDAGENTS_AUTH_*`` variables (``serve --auth-*`` sets them, so every
worker reads the same): an issuer (its discovery document names the key set) or a JWKS URL,
the audience, the accepted algorithms, the clock leeway, and which claims give the user id,
display name, email, admin role and tenant. PyJWT does the cryptography; its ``PyJWKClient``
fetches the key set, caches it and refetches when a token names a key it has not seen, at
most once per cooldown, so a flood of made-up key ids cannot hammer the provider.

A refused token gets one reason (expired, not yet valid, wrong issuer, wrong audience, unknown
key, unsigned, an algorithm that is not accepted, a signature that does not verify); the token
itself is never logged nor echoed.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jwt
from jwt import PyJWK, PyJWKClient

from ..exceptions import AuthenticationFailed, DefinitionError
from ..store.base import UserRecord

__all__ = [
    "AUTH_ENV_PREFIX",
    "Identity",
    "JwtVerifier",
    "OidcSettings",
    "looks_like_jwt",
    "settings_from_flags",
]

AUTH_ENV_PREFIX = "STANDARDAGENTS_AUTH_"
#: algorithms a deployment may accept: asymmetric only (a shared secret would let anyone who
#: can verify a token also mint one, and an HMAC key made of a public key is the classic confusion)
_ASYMMETRIC = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"})
_KEY_TYPES = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}
#: a verified token is trusted this long without verifying it again (never past its expiry)
_TOKEN_CACHE_SECONDS = 5.0


@dataclass(slots=True)
class Identity(UserRecord):
    """A caller identified by a provider's token: a user record (so every route that takes a
    caller takes it) with the tenant, roles and the token's claims beside it."""

    tenant: str | None = None
    roles: tuple[str, ...] = ()
    claims: dict[str, Any] = field(default_factory=dict)
    issuer: str | None = None


@dataclass(frozen=True, slots=True)
class OidcSettings:
    """How tokens from the identity provider are verified and read."""

    issuer: str | None = None
    jwks_url: str | None = None
    audience: str | None = None
    algorithms: tuple[str, ...] = ("RS256", "ES256")
    #: seconds of clock difference tolerated on ``exp``, ``nbf`` and ``iat``
    leeway: float = 30.0
    user_claim: str = "sub"
    name_claim: str = "name"
    email_claim: str = "email"
    #: the claim holding roles (a string or a list); holding ``admin_value`` (or being
    #: ``true``) makes the caller an admin
    roles_claim: str = "roles"
    admin_value: str = "admin"
    tenant_claim: str = "tenant"
    #: the web app's client id at the provider (sign-in with the authorization-code flow)
    client_id: str | None = None
    scopes: str = "openid profile email"
    #: a new key id triggers a refetch of the key set at most this often (seconds)
    refetch_cooldown: float = 30.0
    #: the key set is fetched again after this long even when no new key id is seen
    jwks_lifespan: float = 300.0

    @property
    def enabled(self) -> bool:
        return bool(self.issuer or self.jwks_url)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OidcSettings:
        """The settings ``STANDARDAGENTS_AUTH_*`` describe; a bad value is a
        :class:`~standardagents.exceptions.DefinitionError` naming the variable."""
        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            value = env.get(AUTH_ENV_PREFIX + name, "").strip()
            return value or None

        def number(name: str, default: float) -> float:
            raw = get(name)
            if raw is None:
                return default
            try:
                value = float(raw)
            except ValueError:
                raise DefinitionError(f"{AUTH_ENV_PREFIX}{name}: a number of seconds (got {raw!r})") from None
            if value < 0:
                raise DefinitionError(f"{AUTH_ENV_PREFIX}{name}: at least 0 (got {raw!r})")
            return value

        kwargs: dict[str, Any] = {}
        for name, attr in (("ISSUER", "issuer"), ("JWKS_URL", "jwks_url"), ("AUDIENCE", "audience"),
                           ("USER_CLAIM", "user_claim"), ("NAME_CLAIM", "name_claim"),
                           ("EMAIL_CLAIM", "email_claim"), ("ROLES_CLAIM", "roles_claim"),
                           ("ADMIN_VALUE", "admin_value"), ("TENANT_CLAIM", "tenant_claim"),
                           ("CLIENT_ID", "client_id"), ("SCOPES", "scopes")):
            value = get(name)
            if value is not None:
                kwargs[attr] = value
        algorithms = get("ALGORITHMS")
        if algorithms is not None:
            kwargs["algorithms"] = tuple(a.strip() for a in algorithms.split(",") if a.strip())
        defaults = cls()
        kwargs["leeway"] = number("LEEWAY", defaults.leeway)
        kwargs["refetch_cooldown"] = number("REFETCH_COOLDOWN", defaults.refetch_cooldown)
        kwargs["jwks_lifespan"] = number("JWKS_LIFESPAN", defaults.jwks_lifespan)
        return cls(**kwargs).checked()

    def checked(self) -> OidcSettings:
        """These settings, or a :class:`DefinitionError` naming what is wrong."""
        if not self.enabled:
            return self
        problems: list[tuple[str, str]] = []
        if not self.audience:
            problems.append((f"{AUTH_ENV_PREFIX}AUDIENCE", "required with an issuer or a JWKS URL (else a token "
                             "the provider made for any other application would be accepted)"))
        if not self.algorithms:
            problems.append((f"{AUTH_ENV_PREFIX}ALGORITHMS", "name at least one algorithm"))
        for alg in self.algorithms:
            if alg not in _ASYMMETRIC:
                problems.append((f"{AUTH_ENV_PREFIX}ALGORITHMS",
                                 f"{alg!r} is not accepted: only {', '.join(sorted(_ASYMMETRIC))}"))
        for name, url in (("ISSUER", self.issuer), ("JWKS_URL", self.jwks_url)):
            if url and not url.startswith(("https://", "http://")):
                problems.append((f"{AUTH_ENV_PREFIX}{name}", f"an http(s) URL (got {url!r})"))
        if problems:
            raise DefinitionError(problems)
        return self


def looks_like_jwt(token: str) -> bool:
    """A compact JWS: three base64url parts, the header a JSON object (``eyJ``)."""
    return token.startswith("eyJ") and token.count(".") == 2


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


def settings_from_flags(**flags: str | None) -> OidcSettings:
    """Put ``serve``'s ``--auth-*`` flags (``issuer``, ``jwks_url``, ``audience``, ``algorithms``,
    ``client_id``) into the environment, where every worker reads them, and check the whole:
    a :class:`DefinitionError` names what is wrong before the server starts."""
    for name, value in flags.items():
        if value is not None:
            os.environ[AUTH_ENV_PREFIX + name.upper()] = value
    return OidcSettings.from_env()
