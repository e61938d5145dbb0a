"""Approval tokens: the secret they are signed with, signing and reading them, and the shape
every surface shows a paused call in. Below the loop (which announces paused calls) and the
approval flow (which reads the tokens back)."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from itsdangerous.encoding import base64_encode
from itsdangerous.serializer import Serializer

from ..exceptions import StandardAgentsError
from ..records import now_ms

if TYPE_CHECKING:
    from ..store.base import Store

__all__ = ["TOKEN_MAX_AGE", "ApprovalError", "ApprovalForbidden", "Decider", "approval_request", "call_digest",
           "current_decider", "make_token", "read_token", "signing_secret"]

#: a resume token older than this is stale (seconds)
TOKEN_MAX_AGE = 7 * 24 * 3600
_SALT = "standardagents.approval.v1"
_SECRET_KEY = "_signing_secret"


class ApprovalError(StandardAgentsError):
    """A resume token was forged, stale, or names a call that is no longer pending."""


class ApprovalForbidden(ApprovalError):
    """The decider is not among the agent's approvers, or the call waited past its expiry."""


@dataclass(frozen=True, slots=True)
class Decider:
    """Who decides a paused call, as the audit records them: the caller's id, name, admin role,
    and (from an identity provider) tenant, roles and claims."""

    id: str
    name: str
    is_admin: bool = False
    tenant: str | None = None
    roles: tuple[str, ...] = ()
    claims: dict[str, Any] = field(default_factory=dict)


#: the caller of the request being served (set where a server door identifies it), so every
#: door's decision is attributed without threading the caller through each; None: an operator
current_decider: ContextVar[Decider | None] = ContextVar("standardagents_decider", default=None)


def call_digest(tool: str, arguments: Any) -> str:
    """SHA-256 of a tool name and its exact arguments (canonical JSON): a decision is bound to
    it, so a changed call needs a new one."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:
            pass  # not JSON: the text itself is what is decided
    body = json.dumps([tool, arguments], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(body.encode()).hexdigest()


async def signing_secret(store: Store) -> str:
    """The secret tokens are signed with: ``STANDARDAGENTS_SECRET``, else one kept in the store
    (created once), so tokens survive restarts and verify on every worker.

    It lives in the runtime's ``system`` env scope, which tools cannot read or write (they
    see the thread, user and instance scopes); a secret an older version kept in the
    ``instance`` scope is moved there, so tokens already handed out stay valid."""
    env = os.environ.get("STANDARDAGENTS_SECRET")
    if env:
        return env
    value = await store.get_env("system", "", _SECRET_KEY)
    if isinstance(value, str) and value:
        return value
    legacy = await store.get_env("instance", "", _SECRET_KEY)
    candidate = legacy if isinstance(legacy, str) and legacy else secrets.token_urlsafe(32)
    # of concurrent first callers (several workers), one writes; all read the winner back
    await store.claim_env("system", "", _SECRET_KEY, candidate, now_ms())
    stored = await store.get_env("system", "", _SECRET_KEY)
    if legacy is not None:
        await store.delete_env("instance", "", _SECRET_KEY)
    return stored if isinstance(stored, str) and stored else candidate


class _TokenSerializer(URLSafeTimedSerializer):
    """Signed, timed, URL-safe tokens whose payload is never compressed: a compressed payload
    starts the token with a dot, which reads like a typo on a command line (and some shells'
    completion hides it). Reading accepts both, so tokens made before stay valid."""

    def dump_payload(self, obj: Any) -> bytes:
        return base64_encode(Serializer.dump_payload(self, obj))


def make_token(secret: str, *, thread_id: str, execution_id: str, call_id: str, digest: str | None = None) -> str:
    """A resume token for one paused call (letters, digits, ``-``, ``_`` and ``.``, never first),
    bound to the call's :func:`call_digest` when given."""
    payload = {"t": thread_id, "e": execution_id, "c": call_id}
    if digest is not None:
        payload["d"] = digest
    return _TokenSerializer(secret, salt=_SALT).dumps(payload)


def read_token(secret: str, token: str, *, max_age: int = TOKEN_MAX_AGE) -> dict[str, Any]:
    """The token's payload, or :class:`ApprovalError` when it is forged or stale (a token
    made by an earlier version, with a compressed payload, reads the same)."""
    try:
        data = _TokenSerializer(secret, salt=_SALT).loads(token.strip(), max_age=max_age)
    except SignatureExpired:
        raise ApprovalError("this approval token has expired") from None
    except BadSignature:
        raise ApprovalError("this approval token is not valid (forged or damaged)") from None
    if not isinstance(data, dict) or not {"t", "e", "c"} <= set(data):
        raise ApprovalError("this approval token is not valid")
    out = {"thread_id": data["t"], "execution_id": data["e"], "call_id": data["c"]}
    if "d" in data:
        out["digest"] = data["d"]  # the call it was asked for (tokens made before carry none)
    return out


def approval_request(call_id: str, tool: str, arguments: Any, token: str, execution_id: str) -> dict[str, Any]:
    """One paused call as every surface shows it: the pattern's ``interruption`` and
    ``stateToken`` beside the flat ``id``/``tool``/``arguments``/``token`` fields."""
    return {"id": call_id, "tool": tool, "arguments": arguments, "token": token, "executionId": execution_id,
            "interruption": {"id": call_id, "toolName": tool, "args": arguments}, "stateToken": token}
