"""Bearer JWTs from an identity provider: a local OIDC provider over real HTTP signs real RS256
and ES256 tokens; every accepted and refused case through the REST API, key rotation, the
settings' errors, and the token never reaching a log."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from standardagents import Runtime
from standardagents.exceptions import DefinitionError
from standardagents.server import create_app
from standardagents.server.oidc import OidcSettings
from standardagents.testing.oidc import OidcProvider, SigningKey

API = "/api"
AUDIENCE = "sa-api"


@pytest.fixture
def idp() -> Iterator[OidcProvider]:
    with OidcProvider(audience=AUDIENCE) as provider:
        yield provider


@pytest.fixture
def oidc_env(idp: OidcProvider, monkeypatch: pytest.MonkeyPatch) -> OidcProvider:
    monkeypatch.setenv("STANDARDAGENTS_AUTH_ISSUER", idp.issuer)
    monkeypatch.setenv("STANDARDAGENTS_AUTH_AUDIENCE", AUDIENCE)
    return idp


@pytest.fixture
async def jwt_client(oidc_env: OidcProvider, runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(runtime, close_runtime=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        yield c


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _handmade(header: dict[str, Any], claims: dict[str, Any], sign: Any = None) -> str:
    """A token assembled by hand (what an attacker sends: libraries refuse to make these)."""
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    signature = sign(signing_input.encode()) if sign is not None else b""
    return f"{signing_input}.{_b64(signature)}"


def _claims(idp: OidcProvider, **extra: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"iss": idp.issuer, "aud": AUDIENCE, "sub": "alice", "iat": now, "exp": now + 300, **extra}


async def _me(client: httpx.AsyncClient, token: str) -> httpx.Response:
    return await client.get(f"{API}/users/me", headers={"Authorization": f"Bearer {token}"})


def _refusal(r: httpx.Response) -> str:
    assert r.status_code == 401, r.text
    assert r.headers["www-authenticate"] == 'Bearer error="invalid_token"'
    assert r.json()["error"]["code"] == "unauthorized"
    return str(r.json()["error"]["message"])


# accepted ---------------------------------------------------------------------------------------
async def test_rs256_token_from_the_issuer_is_the_caller(jwt_client: httpx.AsyncClient, idp: OidcProvider) -> None:
    r = await _me(jwt_client, idp.token(sub="alice", name="Alice", email="alice@example.com"))
    assert r.status_code == 200, r.text
    assert r.json() == {"id": "alice", "name": "Alice", "email": "alice@example.com", "isAdmin": False}


async def test_es256_token_from_the_issuer_is_the_caller(jwt_client: httpx.AsyncClient, idp: OidcProvider) -> None:
    r = await _me(jwt_client, idp.token(alg="ES256", sub="bob"))
    assert r.status_code == 200, r.text
    assert r.json() == {"id": "bob", "name": "bob", "email": None, "isAdmin": False}


async def test_admin_role_claim_makes_the_caller_an_admin(jwt_client: httpx.AsyncClient, idp: OidcProvider) -> None:
    r = await _me(jwt_client, idp.token(sub="carol", roles=["reader", "admin"]))
    assert r.json()["isAdmin"] is True


async def test_jwks_url_alone_verifies_tokens_without_discovery(idp: OidcProvider, runtime: Runtime,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STANDARDAGENTS_AUTH_JWKS_URL", idp.jwks_url)
    monkeypatch.setenv("STANDARDAGENTS_AUTH_AUDIENCE", AUDIENCE)
    app = create_app(runtime, close_runtime=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        r = await _me(c, idp.token(sub="dave", issuer="https://any-issuer.example"))
    assert r.status_code == 200
    assert r.json()["id"] == "dave"


async def test_claim_names_are_configurable(idp: OidcProvider, runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in (("ISSUER", idp.issuer), ("AUDIENCE", AUDIENCE), ("USER_CLAIM", "uid"),
                        ("NAME_CLAIM", "display"), ("ROLES_CLAIM", "groups"), ("ADMIN_VALUE", "ops")):
        monkeypatch.setenv(f"STANDARDAGENTS_AUTH_{name}", value)
    app = create_app(runtime, close_runtime=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        r = await _me(c, idp.token(sub="ignored", uid="u-7", display="Erin", groups="ops"))
    assert r.json() == {"id": "u-7", "name": "Erin", "email": None, "isAdmin": True}


async def test_api_tokens_still_work_beside_jwts(jwt_client: httpx.AsyncClient, actors: Any) -> None:
    r = await jwt_client.get(f"{API}/users/me", headers=actors.auth("alice"))
    assert r.status_code == 200
    assert r.json()["id"] == actors.ids["alice"]


async def test_expiry_within_the_leeway_is_accepted(jwt_client: httpx.AsyncClient, idp: OidcProvider) -> None:
    r = await _me(jwt_client, idp.token(sub="alice", expires_in=-5))  # the default leeway is 30 s
    assert r.status_code == 200


# refused ----------------------------------------------------------------------------------------
async def test_expired_token_is_401_expired(jwt_client: httpx.AsyncClient, idp: OidcProvider) -> None:
    assert _refusal(await _me(jwt_client, idp.token(sub="alice", expires_in=-120))) == "the token has expired"


async def test_token_not_yet_valid_is_401(jwt_client: httpx.AsyncClient, idp: OidcProvider) -> None:
    token = idp.token(sub="alice", nbf=int(time.time()) + 600)
    assert _refusal(await _me(jwt_client, token)) == "the token is not valid yet (its nbf or iat is in the future)"


async def test_wrong_issuer_is_401(jwt_client: httpx.AsyncClient, idp: OidcProvider) -> None:
    token = idp.token(sub="alice", issuer="https://evil.example")
    assert _refusal(await _me(jwt_client, token)) == "the token was issued by another issuer"


async def test_wrong_audience_is_401(jwt_client: httpx.AsyncClient, idp: OidcProvider) -> None:
    token = idp.token(sub="alice", audience="another-app")
    assert _refusal(await _me(jwt_client, token)) == "the token was made for another audience"


async def test_unknown_key_is_401(jwt_client: httpx.AsyncClient, idp: OidcProvider) -> None:
    stranger = SigningKey("stranger", "RS256", idp.add_key("RS256").private_key)
    idp.remove_key(idp.keys[-1].kid)
    token = idp.token(key=stranger, sub="alice")
    assert _refusal(await _me(jwt_client, token)) == "the token was signed with an unknown key 'stranger'"


async def test_alg_none_is_401(jwt_client: httpx.AsyncClient, idp: OidcProvider) -> None:
    token = _handmade({"alg": "none", "typ": "JWT"}, _claims(idp))
    assert _refusal(await _me(jwt_client, token)) == "the token is unsigned (alg 'none'): refused"


async def test_hs256_signed_with_the_public_key_is_401(jwt_client: httpx.AsyncClient, idp: OidcProvider) -> None:
    """The classic confusion: the RSA public key (which anyone can fetch) used as an HMAC secret."""
    key = idp.key("RS256")
    pem = key.private_key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    token = _handmade({"alg": "HS256", "typ": "JWT", "kid": key.kid}, _claims(idp),
                      lambda data: hmac.new(pem, data, hashlib.sha256).digest())
    assert _refusal(await _me(jwt_client, token)) == "the token's algorithm 'HS256' is not accepted (accepted: RS256, ES256)"


async def test_es256_header_on_an_rsa_key_is_401(jwt_client: httpx.AsyncClient, idp: OidcProvider) -> None:
    rsa_kid = idp.key("RS256").kid
    token = idp.token(alg="ES256", sub="alice", headers={"kid": rsa_kid})
    assert _refusal(await _me(jwt_client, token)) == f"the token's algorithm 'ES256' does not fit key {rsa_kid!r} (a RSA key)"


async def test_tampered_claims_are_401(jwt_client: httpx.AsyncClient, idp: OidcProvider) -> None:
    header, _, signature = idp.token(sub="alice").split(".")
    forged = f"{header}.{_b64(json.dumps(_claims(idp, sub='root')).encode())}.{signature}"
    assert _refusal(await _me(jwt_client, forged)) == "the token's signature does not verify"


async def test_token_without_a_subject_is_401(jwt_client: httpx.AsyncClient, idp: OidcProvider) -> None:
    assert _refusal(await _me(jwt_client, idp.token(name="nobody"))) == "the token has no 'sub' claim"


async def test_malformed_jwt_is_401(jwt_client: httpx.AsyncClient) -> None:
    assert _refusal(await _me(jwt_client, "eyJub3Q.a.jwt")) == "the bearer token is not a well-formed JWT"


# keys -------------------------------------------------------------------------------------------
async def test_a_new_key_id_refetches_the_key_set_once(jwt_client: httpx.AsyncClient, idp: OidcProvider) -> None:
    assert (await _me(jwt_client, idp.token(sub="alice"))).status_code == 200
    fetched = idp.jwks_fetches
    rotated = idp.add_key("RS256")
    r = await _me(jwt_client, idp.token(key=rotated, sub="alice"))
    again = await _me(jwt_client, idp.token(key=rotated, sub="bob"))
    assert (r.status_code, again.status_code) == (200, 200)
    assert idp.jwks_fetches == fetched + 1


async def test_unknown_key_ids_within_the_cooldown_do_not_refetch(jwt_client: httpx.AsyncClient,
                                                                   idp: OidcProvider) -> None:
    assert (await _me(jwt_client, idp.token(sub="alice"))).status_code == 200
    rotated = idp.add_key("RS256")
    assert (await _me(jwt_client, idp.token(key=rotated, sub="alice"))).status_code == 200
    fetched = idp.jwks_fetches
    for n in range(5):
        stranger = SigningKey(f"made-up-{n}", "RS256", rotated.private_key)
        _refusal(await _me(jwt_client, idp.token(key=stranger, sub="alice")))
    assert idp.jwks_fetches == fetched


async def test_a_removed_key_is_refused_once_the_set_is_fetched_again(idp: OidcProvider, runtime: Runtime,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STANDARDAGENTS_AUTH_ISSUER", idp.issuer)
    monkeypatch.setenv("STANDARDAGENTS_AUTH_AUDIENCE", AUDIENCE)
    monkeypatch.setenv("STANDARDAGENTS_AUTH_JWKS_LIFESPAN", "0")
    app = create_app(runtime, close_runtime=False)
    old = idp.key("ES256")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        assert (await _me(c, idp.token(key=old, sub="alice"))).status_code == 200
        idp.remove_key(old.kid)
        message = _refusal(await _me(c, idp.token(key=old, sub="bob")))
    assert message == f"the token was signed with an unknown key {old.kid!r}"


# settings and logs ------------------------------------------------------------------------------
def test_settings_without_an_audience_are_refused() -> None:
    with pytest.raises(DefinitionError) as caught:
        OidcSettings.from_env({"STANDARDAGENTS_AUTH_ISSUER": "https://idp.example"})
    assert str(caught.value).startswith("STANDARDAGENTS_AUTH_AUDIENCE: required with an issuer or a JWKS URL")


def test_settings_refuse_a_symmetric_algorithm() -> None:
    with pytest.raises(DefinitionError) as caught:
        OidcSettings.from_env({"STANDARDAGENTS_AUTH_JWKS_URL": "https://idp.example/jwks",
                               "STANDARDAGENTS_AUTH_AUDIENCE": "a", "STANDARDAGENTS_AUTH_ALGORITHMS": "RS256,HS256"})
    assert str(caught.value).startswith("STANDARDAGENTS_AUTH_ALGORITHMS: 'HS256' is not accepted")


def test_settings_refuse_a_leeway_that_is_not_a_number() -> None:
    with pytest.raises(DefinitionError) as caught:
        OidcSettings.from_env({"STANDARDAGENTS_AUTH_JWKS_URL": "https://idp.example/jwks",
                               "STANDARDAGENTS_AUTH_AUDIENCE": "a", "STANDARDAGENTS_AUTH_LEEWAY": "soon"})
    assert str(caught.value) == "STANDARDAGENTS_AUTH_LEEWAY: a number of seconds (got 'soon')"


async def test_the_token_never_reaches_the_log_or_the_answer(jwt_client: httpx.AsyncClient, idp: OidcProvider,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    good = idp.token(sub="alice")
    bad = idp.token(sub="alice", audience="another-app")
    with caplog.at_level(logging.DEBUG):
        ok = await _me(jwt_client, good)
        refused = await _me(jwt_client, bad)
    assert (ok.status_code, refused.status_code) == (200, 401)
    for token in (good, bad):
        assert token not in caplog.text
        assert token.split(".")[2] not in refused.text


def test_serve_refuses_auth_flags_without_an_audience(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from server_fixtures import write_project
    from standardagents.cli import app

    for name in ("ISSUER", "JWKS_URL", "AUDIENCE", "ALGORITHMS", "CLIENT_ID"):
        monkeypatch.delenv(f"STANDARDAGENTS_AUTH_{name}", raising=False)
    project = write_project(tmp_path / "project")
    monkeypatch.setenv("STANDARDAGENTS_AUTH_ISSUER", "")  # restored after the test, whatever serve sets
    result = CliRunner().invoke(app, ["serve", str(project), "--auth-issuer", "https://idp.example"],
                                env={"COLUMNS": "400"})
    assert result.exit_code == 2
    assert "STANDARDAGENTS_AUTH_AUDIENCE: required with an issuer or a JWKS URL" in result.output


def test_a_token_in_a_streams_query_is_blanked_in_the_access_log(caplog: pytest.LogCaptureFixture) -> None:
    import standardagents.server.auth  # noqa: F401  (installs the access log's filter)

    access = logging.getLogger("uvicorn.access")
    with caplog.at_level(logging.INFO, logger="uvicorn.access"):
        access.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "GET",
                    "/api/threads/thr_1/stream?last=3&token=eyJhbGciOi.secret.sig", "1.1", 200)
    assert caplog.messages == ['127.0.0.1:5000 - "GET /api/threads/thr_1/stream?last=3&token=[redacted] HTTP/1.1" 200']
