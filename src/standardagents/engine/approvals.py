"""Human approval: a tool marked ``needs_approval`` pauses the turn before it runs.

The execution is stored as ``waiting`` with its pending calls; each call is announced with
an opaque resume token signed with the runtime's secret. Approving or denying every pending
call continues the same execution (a denial becomes a tool result the model reads).
"""

from __future__ import annotations

import os
import secrets
from typing import TYPE_CHECKING, Any

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer

from ..exceptions import StandardAgentsError

if TYPE_CHECKING:
    from ..store.base import Store

__all__ = ["TOKEN_MAX_AGE", "ApprovalError", "make_token", "read_token", "signing_secret"]

#: a resume token older than this is stale (seconds)
TOKEN_MAX_AGE = 7 * 24 * 3600
_SALT = "standardagents.approval.v1"
_SECRET_KEY = "_signing_secret"


class ApprovalError(StandardAgentsError):
    """A resume token was forged, stale, or names a call that is no longer pending."""


async def signing_secret(store: Store) -> str:
    """The secret tokens are signed with: ``STANDARDAGENTS_SECRET``, else one kept in the store
    (created once), so tokens survive restarts and verify on every worker."""
    env = os.environ.get("STANDARDAGENTS_SECRET")
    if env:
        return env
    value = await store.get_env("instance", "", _SECRET_KEY)
    if isinstance(value, str) and value:
        return value
    value = secrets.token_urlsafe(32)
    await store.set_env("instance", "", _SECRET_KEY, value)
    stored = await store.get_env("instance", "", _SECRET_KEY)
    return stored if isinstance(stored, str) and stored else value


def make_token(secret: str, *, thread_id: str, execution_id: str, call_id: str) -> str:
    return URLSafeTimedSerializer(secret, salt=_SALT).dumps({"t": thread_id, "e": execution_id, "c": call_id})


def read_token(secret: str, token: str, *, max_age: int = TOKEN_MAX_AGE) -> dict[str, Any]:
    """The token's payload, or :class:`ApprovalError` when it is forged or stale."""
    try:
        data = URLSafeTimedSerializer(secret, salt=_SALT).loads(token, max_age=max_age)
    except SignatureExpired:
        raise ApprovalError("this approval token has expired") from None
    except BadSignature:
        raise ApprovalError("this approval token is not valid (forged or damaged)") from None
    if not isinstance(data, dict) or not {"t", "e", "c"} <= set(data):
        raise ApprovalError("this approval token is not valid")
    return {"thread_id": data["t"], "execution_id": data["e"], "call_id": data["c"]}
