"""Bearer tokens from an identity provider: JWTs verified against the provider's published keys.

Settings come from ``STANDARDAGENTS_AUTH_*`` variables (``serve --auth-*`` sets them, so every
worker reads the same): an issuer (its discovery document names the key set) or a JWKS URL,
the audience, the accepted algorithms, the clock leeway, and which claims give the user id,
display name, email, admin role and tenant. The verifier itself (:mod:`.jwt_verifier`, PyJWT
and its cryptography) is imported only by a server that has a provider configured: it is
several MiB of every worker's memory.

A refused token gets one reason (expired, not yet valid, wrong issuer, wrong audience, unknown
key, unsigned, an algorithm that is not accepted, a signature that does not verify); the token
itself is never logged nor echoed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..exceptions import DefinitionError
from ..store.base import UserRecord

if TYPE_CHECKING:
    from .jwt_verifier import JwtVerifier

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


def settings_from_flags(**flags: str | None) -> OidcSettings:
    """Put ``serve``'s ``--auth-*`` flags (``issuer``, ``jwks_url``, ``audience``, ``algorithms``,
    ``client_id``) into the environment, where every worker reads them, and check the whole:
    a :class:`DefinitionError` names what is wrong before the server starts."""
    for name, value in flags.items():
        if value is not None:
            os.environ[AUTH_ENV_PREFIX + name.upper()] = value
    return OidcSettings.from_env()


def __getattr__(name: str) -> Any:
    # the verifier is imported with PyJWT only when asked for (see the module's docstring)
    if name == "JwtVerifier":
        from .jwt_verifier import JwtVerifier
        return JwtVerifier
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
