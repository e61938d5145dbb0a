"""A local OpenID Connect provider for tests: discovery document, JWKS, authorize and token
endpoints, served over real HTTP on 127.0.0.1 and signing real RS256 / ES256 tokens.

Use it to test a deployment that trusts an identity provider without reaching one::

    with OidcProvider(audience="my-api") as idp:
        os.environ["STANDARDAGENTS_AUTH_ISSUER"] = idp.issuer
        os.environ["STANDARDAGENTS_AUTH_AUDIENCE"] = "my-api"
        token = idp.token(sub="alice", tenant="acme")

The authorization endpoint signs in :attr:`OidcProvider.user` at once (no login page) and
redirects back with a code; the token endpoint checks the code's PKCE verifier (S256), the
client id and the redirect URI before it answers with an access token and an ID token.
Rotating keys (:meth:`OidcProvider.add_key`, :meth:`OidcProvider.remove_key`) changes what
the JWKS endpoint publishes; :attr:`OidcProvider.jwks_fetches` counts its reads.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Literal

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from starlette.types import Receive, Scope, Send

from ._server import LoopbackServer

__all__ = ["OidcProvider", "SigningKey"]

KeyAlgorithm = Literal["RS256", "ES256"]


@dataclass(slots=True)
class SigningKey:
    """One key of the provider: its id, algorithm and private key (the JWKS shows the public half)."""

    kid: str
    alg: KeyAlgorithm
    private_key: Any

    def public_jwk(self) -> dict[str, Any]:
        public = self.private_key.public_key()
        raw = RSAAlgorithm.to_jwk(public, as_dict=True) if self.alg == "RS256" else ECAlgorithm.to_jwk(public, as_dict=True)
        return {**raw, "kid": self.kid, "alg": self.alg, "use": "sig"}


def _new_private_key(alg: KeyAlgorithm) -> Any:
    if alg == "RS256":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return ec.generate_private_key(ec.SECP256R1())


_FIRST_KEYS: dict[str, Any] = {}


def _first_key(alg: KeyAlgorithm) -> Any:
    """The first key of each algorithm, made once per process (an RSA key takes a while, and a
    test double's keys protect nothing); keys added later are always new."""
    if alg not in _FIRST_KEYS:
        _FIRST_KEYS[alg] = _new_private_key(alg)
    return _FIRST_KEYS[alg]


class OidcProvider(LoopbackServer):
    """A tiny identity provider (see the module's docstring)."""

    label = "oidc-provider"

    def __init__(self, *, audience: str = "standardagents", client_id: str = "standardagents-web",
                 algorithms: tuple[KeyAlgorithm, ...] = ("RS256", "ES256"), host: str = "127.0.0.1",
                 port: int = 0) -> None:
        super().__init__(host=host, port=port)
        self.audience = audience
        self.client_id = client_id
        self.keys: list[SigningKey] = [SigningKey(f"{alg.lower()}-1", alg, _first_key(alg)) for alg in algorithms]
        #: the claims of whoever signs in through the authorization endpoint
        self.user: dict[str, Any] = {"sub": "alice", "name": "Alice", "email": "alice@example.com"}
        self.jwks_fetches = 0
        self.token_requests: list[dict[str, str]] = []
        self._codes: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    # what a test reads -----------------------------------------------------------------------
    @property
    def issuer(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def jwks_url(self) -> str:
        return f"{self.issuer}/jwks"

    def key(self, alg: KeyAlgorithm = "RS256") -> SigningKey:
        """The newest key of ``alg``."""
        for key in reversed(self.keys):
            if key.alg == alg:
                return key
        raise KeyError(f"the provider has no {alg} key")

    def add_key(self, alg: KeyAlgorithm = "RS256", kid: str | None = None) -> SigningKey:
        """A new key, published from now on (a rotation; the old ones stay until removed)."""
        key = SigningKey(kid or f"{alg.lower()}-{secrets.token_hex(4)}", alg, _new_private_key(alg))
        with self._lock:
            self.keys.append(key)
        return key

    def remove_key(self, kid: str) -> None:
        with self._lock:
            self.keys = [k for k in self.keys if k.kid != kid]

    def token(self, *, alg: KeyAlgorithm = "RS256", key: SigningKey | None = None, expires_in: float = 300,
              audience: str | list[str] | None = None, issuer: str | None = None,
              headers: dict[str, Any] | None = None, **claims: Any) -> str:
        """A token signed with the provider's newest ``alg`` key (or ``key``): ``iss``, ``aud``,
        ``iat`` and ``exp`` are filled in unless given in ``claims``."""
        signer = key or self.key(alg)
        now = int(time.time())
        body = {"iss": issuer or self.issuer, "aud": audience or self.audience, "iat": now,
                "exp": now + int(expires_in), **claims}
        return jwt.encode(body, signer.private_key, algorithm=signer.alg, headers={"kid": signer.kid, **(headers or {})})

    # HTTP ------------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        path = scope["path"]
        if path == "/.well-known/openid-configuration":
            await self._json(send, {
                "issuer": self.issuer, "jwks_uri": self.jwks_url, "authorization_endpoint": f"{self.issuer}/authorize",
                "token_endpoint": f"{self.issuer}/token", "response_types_supported": ["code"],
                "subject_types_supported": ["public"], "id_token_signing_alg_values_supported": ["RS256", "ES256"],
                "code_challenge_methods_supported": ["S256"], "grant_types_supported": ["authorization_code"]})
        elif path == "/jwks":
            with self._lock:
                self.jwks_fetches += 1
                keys = [k.public_jwk() for k in self.keys]
            await self._json(send, {"keys": keys})
        elif path == "/authorize":
            await self._authorize(scope, send)
        elif path == "/token" and scope["method"] == "POST":
            body = b""
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            await self._token(send, {k: v[0] for k, v in urllib.parse.parse_qs(body.decode()).items()})
        else:
            await self._json(send, {"error": "not_found"}, 404)

    async def _authorize(self, scope: Scope, send: Send) -> None:
        query = {k: v[0] for k, v in urllib.parse.parse_qs(scope["query_string"].decode()).items()}
        redirect = query.get("redirect_uri", "")
        if query.get("client_id") != self.client_id or not redirect:
            await self._json(send, {"error": "invalid_client"}, 400)
            return
        if query.get("response_type") != "code" or query.get("code_challenge_method") != "S256" \
                or not query.get("code_challenge"):
            await self._json(send, {"error": "invalid_request", "error_description": "code flow with PKCE (S256) only"}, 400)
            return
        code = secrets.token_urlsafe(16)
        with self._lock:
            self._codes[code] = {"challenge": query["code_challenge"], "redirect_uri": redirect,
                                 "nonce": query.get("nonce"), "user": dict(self.user)}
        target = redirect + ("&" if "?" in redirect else "?") + urllib.parse.urlencode(
            {"code": code, "state": query.get("state", "")})
        await send({"type": "http.response.start", "status": 302, "headers": [(b"location", target.encode())]})
        await send({"type": "http.response.body", "body": b""})

    async def _token(self, send: Send, form: dict[str, str]) -> None:
        with self._lock:
            self.token_requests.append(dict(form))
            grant = self._codes.pop(form.get("code", ""), None)  # a code is used once
        if form.get("grant_type") != "authorization_code" or grant is None:
            await self._json(send, {"error": "invalid_grant"}, 400)
            return
        verifier = form.get("code_verifier", "")
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        if challenge != grant["challenge"] or form.get("redirect_uri") != grant["redirect_uri"] \
                or form.get("client_id") != self.client_id:
            await self._json(send, {"error": "invalid_grant", "error_description": "PKCE or redirect mismatch"}, 400)
            return
        user = grant["user"]
        access = self.token(**user)
        extra = {"nonce": grant["nonce"]} if grant["nonce"] else {}
        id_token = self.token(audience=self.client_id, **user, **extra)
        await self._json(send, {"access_token": access, "id_token": id_token, "token_type": "Bearer",
                                "expires_in": 300})

    @staticmethod
    async def _json(send: Send, body: Any, status: int = 200) -> None:
        data = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"cache-control", b"no-store"),
                                (b"access-control-allow-origin", b"*")]})
        await send({"type": "http.response.body", "body": data})
