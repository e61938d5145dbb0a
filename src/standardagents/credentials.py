"""Credential grants: a user's secrets that named tools may use and the model never sees.

A tool often needs a credential of the person it works for (an API token for their GitHub).
The user grants it once (``POST /api/users/me/grants`` or :func:`grant_credential`): the
secret, the tools allowed to use it, optional scopes and an expiry. A tool of a thread of that
user asks its state for it (``await state.credential("github")``) and gets a
:class:`Credential` whose ``secret`` it passes on to the API it calls; the secret is never
part of a message, an event, a log record or a trace, and its ``repr`` hides it. Every use,
and every refused use, is audited in the thread's logs without the secret.

Grants are kept in the store's env values (the runtime's own ``system`` scope, which tools
cannot read; one row per user and name):
the secret encrypted with Fernet under a key derived (HKDF-SHA256) from ``STANDARDAGENTS_SECRET``
(else from a random secret the runtime keeps in its own ``system`` env scope), bound to its
user and name. Revoking drops the encrypted secret and keeps the grant's record.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import logging
import os
import re
import secrets
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from .exceptions import StandardAgentsError
from .records import new_id, now_ms

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

    from .engine.state import ThreadState
    from .registry import Registry
    from .store.base import Store

__all__ = [
    "GRANT_SCOPE",
    "Credential",
    "CredentialError",
    "CredentialGrant",
    "GrantStatus",
    "get_credential_grant",
    "grant_credential",
    "grant_scope_id",
    "list_credential_grants",
    "revoke_credential_grant",
    "tool_running",
    "use_credential",
]

log = logging.getLogger("standardagents.credentials")

#: the env-values scope grants are kept in: the runtime's own, which ``state.get_env`` never
#: reads; each user's grants under :func:`grant_scope_id`, keyed by name
GRANT_SCOPE = "system"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_MAX_SECRET = 16_384
_KDF_INFO = b"standardagents.credentials.v1"
_KEY_NAME = "_credentials_secret"

GrantStatus = Literal["active", "expired", "revoked"]


def grant_scope_id(user_id: str) -> str:
    """Where a user's grants are kept in :data:`GRANT_SCOPE` (a digest for very long ids,
    which the column could not hold)."""
    scope_id = f"grant:{user_id}"
    return scope_id if len(scope_id) <= 64 else "grant#" + hashlib.sha256(user_id.encode()).hexdigest()[:56]


class CredentialError(StandardAgentsError):
    """A credential cannot be granted (a bad field, an unknown tool) or used (absent,
    expired, revoked, not granted to this tool or scope). Raised inside a tool, its message
    becomes the tool's error result, written so the model can tell the user what to do."""


@dataclass(frozen=True, slots=True)
class CredentialGrant:
    """A grant as anyone may see it: everything but the secret."""

    id: str
    name: str
    user_id: str
    tools: tuple[str, ...]
    scopes: tuple[str, ...] = ()
    expires_at: int | None = None
    created_at: int = 0
    revoked_at: int | None = None
    description: str | None = None

    def status(self, now: int | None = None) -> GrantStatus:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= (now_ms() if now is None else now):
            return "expired"
        return "active"

    def to_dict(self) -> dict[str, Any]:
        """The wire shape (never with the secret)."""
        return {"id": self.id, "name": self.name, "tools": list(self.tools), "scopes": list(self.scopes),
                "expiresAt": self.expires_at, "createdAt": self.created_at, "revokedAt": self.revoked_at,
                "description": self.description, "status": self.status()}


@dataclass(frozen=True, slots=True)
class Credential:
    """What a tool receives: the secret to pass on, and what it was granted for. Its
    ``repr`` and ``str`` never show the secret, so a credential logged or returned by mistake
    does not leak it."""

    name: str
    secret: str = field(repr=False)
    scopes: tuple[str, ...] = ()
    expires_at: int | None = None
    grant_id: str = ""

    def __repr__(self) -> str:
        return f"Credential(name={self.name!r}, scopes={list(self.scopes)!r}, secret=<hidden>)"

    __str__ = __repr__


# the tool that is running --------------------------------------------------------------------
#: (the ToolDefinition, the call id) of the tool running in this context
_running: ContextVar[tuple[Any, str] | None] = ContextVar("standardagents_running_tool", default=None)


class tool_running:
    """Mark ``tool`` as the one running in this context (the engine wraps each tool call in
    it), so a credential is handed only to the tools it was granted to."""

    __slots__ = ("_running", "_token")

    def __init__(self, tool: Any, call_id: str) -> None:
        self._running = (tool, call_id)

    def __enter__(self) -> None:
        self._token = _running.set(self._running)

    def __exit__(self, *exc: object) -> None:
        _running.reset(self._token)


@dataclass(frozen=True, slots=True)
class _RunningTool:
    name: str  # as a grant names it: ``name``, or ``package/name`` for a packed tool
    call_id: str

    @classmethod
    def now(cls) -> _RunningTool | None:
        running = _running.get()
        if running is None:
            return None
        tool, call_id = running
        package = getattr(tool, "package", None)
        package_id = package.get("packageId") if isinstance(package, dict) else None
        return cls(f"{package_id}/{tool.name}" if package_id else str(tool.name), call_id)


# encryption ----------------------------------------------------------------------------------
_fernets: dict[str, Fernet] = {}


async def _instance_secret(store: Store) -> str:
    """``STANDARDAGENTS_SECRET``, else a random secret kept in the runtime's ``system`` env
    scope (created once: of concurrent first callers one writes, all read the winner)."""
    env = os.environ.get("STANDARDAGENTS_SECRET")
    if env:
        return env
    stored = await store.get_env("system", "", _KEY_NAME)
    if not (isinstance(stored, str) and stored):
        await store.claim_env("system", "", _KEY_NAME, secrets.token_urlsafe(32), now_ms())
        stored = await store.get_env("system", "", _KEY_NAME)
    return str(stored)


async def _fernet(store: Store) -> Fernet:
    from cryptography.fernet import Fernet
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    secret = await _instance_secret(store)
    cached = _fernets.get(secret)
    if cached is None:
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_KDF_INFO).derive(secret.encode())
        cached = _fernets[secret] = Fernet(base64.urlsafe_b64encode(key))
    return cached


def _sealed_payload(user_id: str, name: str, secret: str) -> bytes:
    # the user and the name are sealed with the secret: a ciphertext copied onto another
    # user's or grant's row does not open there
    return json.dumps({"u": user_id, "n": name, "s": secret}, separators=(",", ":")).encode()


# reading and writing grants ------------------------------------------------------------------
def _grant_of(user_id: str, value: Any) -> CredentialGrant | None:
    if not isinstance(value, dict):
        return None
    return CredentialGrant(id=str(value.get("id", "")), name=str(value.get("name", "")), user_id=user_id,
                           tools=tuple(value.get("tools") or ()), scopes=tuple(value.get("scopes") or ()),
                           expires_at=value.get("expiresAt"), created_at=int(value.get("createdAt") or 0),
                           revoked_at=value.get("revokedAt"), description=value.get("description"))


def _record(grant: CredentialGrant, sealed: str | None) -> dict[str, Any]:
    data = {"id": grant.id, "name": grant.name, "tools": list(grant.tools), "scopes": list(grant.scopes),
            "expiresAt": grant.expires_at, "createdAt": grant.created_at, "revokedAt": grant.revoked_at,
            "description": grant.description}
    if sealed is not None:
        data["secret"] = sealed
    return data


def _known_tool(registry: Registry, name: str) -> bool:
    if registry.find("tools", name) is not None:
        return True
    package, _, bare = name.rpartition("/")
    return bool(package) and any(e.package == package and e.name == bare for e in registry.all_entries("tools"))


def _expiry(expires_at: int | str | datetime | None, expires_in: float | None, now: int) -> int | None:
    if expires_at is not None and expires_in is not None:
        raise CredentialError("give expiresAt or expiresIn, not both")
    if expires_in is not None:
        if isinstance(expires_in, bool) or not isinstance(expires_in, int | float) or not 0 < expires_in <= 10 * 365 * 86400:
            raise CredentialError("expiresIn: a number of seconds, more than 0 and at most ten years")
        return now + int(expires_in * 1000)
    if expires_at is None:
        return None
    if isinstance(expires_at, datetime):
        when = expires_at if expires_at.tzinfo else expires_at.replace(tzinfo=UTC)
        at = int(when.timestamp() * 1000)
    elif isinstance(expires_at, str):
        try:
            when = datetime.fromisoformat(expires_at)
        except ValueError:
            raise CredentialError("expiresAt: an ISO 8601 date and time or milliseconds since the epoch") from None
        at = int((when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp() * 1000)
    elif isinstance(expires_at, int) and not isinstance(expires_at, bool):
        at = expires_at
    else:
        raise CredentialError("expiresAt: an ISO 8601 date and time or milliseconds since the epoch")
    if at <= now:
        raise CredentialError("expiresAt: the time is already past")
    return at


def _strings(value: Any, what: str, *, required: bool) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise CredentialError(f"{what}: a list of names")
    items = tuple(value)
    if any(not isinstance(v, str) or not v or len(v) > 200 for v in items):
        raise CredentialError(f"{what}: each entry is a name of 1 to 200 characters")
    if required and not items:
        raise CredentialError(f"{what}: name at least one")
    return tuple(dict.fromkeys(items))


async def grant_credential(store: Store, registry: Registry, user_id: str, name: str, secret: str, *,
                           tools: Sequence[str], scopes: Sequence[str] = (),
                           expires_at: int | str | datetime | None = None, expires_in: float | None = None,
                           description: str | None = None) -> CredentialGrant:
    """Grant ``secret`` under ``name`` to ``tools`` (project tools, or ``package/tool`` for a
    packed one). A grant of the same name is replaced. ``expires_at`` (epoch ms, ISO 8601 or
    a datetime) or ``expires_in`` (seconds) bound it in time. Raises :class:`CredentialError`
    for a bad field or a tool the runtime does not know, and stores nothing then."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise CredentialError("name: 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit")
    if not isinstance(secret, str) or not secret or len(secret) > _MAX_SECRET:
        raise CredentialError(f"secret: a non-empty string of at most {_MAX_SECRET} characters")
    tool_names = _strings(tools, "tools", required=True)
    unknown = [t for t in tool_names if not _known_tool(registry, t)]
    if unknown:
        known = ", ".join(registry.names("tools")) or "none"
        raise CredentialError(f"tools: unknown tool {unknown[0]!r} (known tools: {known})")
    scope_names = _strings(scopes, "scopes", required=False)
    if description is not None and (not isinstance(description, str) or len(description) > 500):
        raise CredentialError("description: a string of at most 500 characters")
    now = now_ms()
    grant = CredentialGrant(id=new_id("grt_"), name=name, user_id=user_id, tools=tool_names, scopes=scope_names,
                            expires_at=_expiry(expires_at, expires_in, now), created_at=now, description=description)
    sealed = (await _fernet(store)).encrypt(_sealed_payload(user_id, name, secret)).decode()
    await store.set_env(GRANT_SCOPE, grant_scope_id(user_id), name, _record(grant, sealed))
    log.info("credential %r granted by user %s to tools %s", name, user_id, ", ".join(tool_names))
    return grant


async def list_credential_grants(store: Store, user_id: str) -> list[CredentialGrant]:
    """The user's grants (revoked and expired ones included), by name; never the secrets."""
    values = await store.list_env(GRANT_SCOPE, grant_scope_id(user_id))
    grants = [_grant_of(user_id, v) for _k, v in sorted(values.items())]
    return [g for g in grants if g is not None]


async def get_credential_grant(store: Store, user_id: str, name: str) -> CredentialGrant | None:
    return _grant_of(user_id, await store.get_env(GRANT_SCOPE, grant_scope_id(user_id), name))


async def revoke_credential_grant(store: Store, user_id: str, name: str) -> CredentialGrant | None:
    """Revoke a grant: its encrypted secret is dropped, its record kept (``revoked``). None
    when the user has no grant of that name; a revoked one is returned as it is."""
    grant = await get_credential_grant(store, user_id, name)
    if grant is None or grant.revoked_at is not None:
        return grant
    revoked = dataclasses.replace(grant, revoked_at=now_ms())
    await store.set_env(GRANT_SCOPE, grant_scope_id(user_id), name, _record(revoked, None))
    log.info("credential %r revoked by user %s", name, user_id)
    return revoked


# using a grant -------------------------------------------------------------------------------
def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


async def _audit(state: ThreadState, name: str, tool: _RunningTool | None, grant: CredentialGrant | None,
                 refused: str | None) -> None:
    data: dict[str, Any] = {"credential": name, "tool": tool.name if tool else None,
                            "toolCallId": tool.call_id if tool else None, "grantId": grant.id if grant else None,
                            "outcome": "refused" if refused else "used"}
    if refused:
        data["reason"] = refused
        text = f"credential {name!r} refused to tool {data['tool']!r}: {refused}"
    else:
        text = f"credential {name!r} used by tool {data['tool']!r}"
    log.log(logging.WARNING if refused else logging.INFO, "thread %s: %s", state.thread_id, text)
    await state.log(text, level="warning" if refused else "info", data=data)


async def use_credential(state: ThreadState, name: str, *, scope: str | None = None) -> Credential:
    """The credential ``name`` of the thread's user, for the tool running now (what
    ``state.credential`` does). Raises :class:`CredentialError` with a message the model can
    relay when there is none to hand over; each call is audited in the thread's logs."""
    tool = _RunningTool.now()
    user_id = state.user_id
    grant: CredentialGrant | None = None
    try:
        if tool is None:
            raise CredentialError("a credential is handed only to a running tool it was granted to "
                                  "(state.credential is for tools)")
        if not user_id:
            raise CredentialError(f"this conversation has no user, so no credential {name!r} is granted to it")
        store = state.runtime.store
        value = await store.get_env(GRANT_SCOPE, grant_scope_id(user_id), name)
        grant = _grant_of(user_id, value)
        if grant is None:
            raise CredentialError(f"the user has not granted the credential {name!r}: ask them to grant it "
                                  f"(to the tool {tool.name!r}) if this tool should act for them")
        if grant.revoked_at is not None:
            raise CredentialError(f"the user revoked the credential {name!r} on {_when(grant.revoked_at)}: ask them "
                                  "to grant it again if this tool should act for them")
        if grant.expires_at is not None and grant.expires_at <= now_ms():
            raise CredentialError(f"the credential {name!r} expired on {_when(grant.expires_at)}: ask the user to "
                                  "grant it again")
        if tool.name not in grant.tools:
            raise CredentialError(f"the credential {name!r} is not granted to the tool {tool.name!r} (only to "
                                  f"{', '.join(grant.tools)}): the user may grant it to this tool too")
        if scope is not None and scope not in grant.scopes:
            granted = ", ".join(grant.scopes) or "none"
            raise CredentialError(f"the credential {name!r} is not granted the scope {scope!r} (granted: {granted})")
        secret = _open(await _fernet(store), value, user_id, name)
    except CredentialError as exc:
        await _audit(state, name, tool, grant, str(exc))
        raise
    await _audit(state, name, tool, grant, None)
    return Credential(name=name, secret=secret, scopes=grant.scopes, expires_at=grant.expires_at, grant_id=grant.id)


def _open(fernet: Fernet, value: dict[str, Any], user_id: str, name: str) -> str:
    from cryptography.fernet import InvalidToken

    unreadable = CredentialError(f"the credential {name!r} cannot be read with this server's secret (it was granted "
                                 "under another STANDARDAGENTS_SECRET): ask the user to grant it again")
    sealed = value.get("secret")
    if not isinstance(sealed, str):
        raise unreadable
    try:
        payload = json.loads(fernet.decrypt(sealed.encode()))
    except (InvalidToken, ValueError):
        raise unreadable from None
    if not isinstance(payload, dict) or payload.get("u") != user_id or payload.get("n") != name:
        raise unreadable
    return str(payload["s"])
