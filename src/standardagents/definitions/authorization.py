"""The project's authorization handler: one function every door asks before a caller acts.

A project defines at most one, in ``agents/authorization/``. It receives an
:class:`AuthorizationRequest` (the caller, the resource and the action) and answers with

- ``None``: no opinion, the built-in policy decides (a thread's owner, or an admin);
- ``True`` / :class:`Allow`: allowed;
- ``False`` / :class:`Deny`: refused (403, with the handler's reason);
- :class:`Narrow`: allowed only for resources whose metadata holds every given key and value
  (a thread list is filtered to them; one thread outside them is refused).

Handlers may be plain or ``async`` functions. They see plain values, never the store, so a
handler is a few lines a reader can check::

    def by_tenant(request: AuthorizationRequest) -> Decision:
        if request.caller is None or request.caller.tenant is None:
            return None
        return Narrow(metadata={"tenant": request.caller.tenant})

    authorization = define_authorization(by_tenant)
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ..exceptions import DefinitionError
from ._base import Definition

__all__ = [
    "Allow",
    "AuthorizationAction",
    "AuthorizationCaller",
    "AuthorizationDefinition",
    "AuthorizationHandler",
    "AuthorizationRequest",
    "AuthorizationResource",
    "Decision",
    "Deny",
    "Narrow",
    "ResourceKind",
    "define_authorization",
]

ResourceKind = Literal["thread", "agent", "memory", "approval", "file"]
#: ``read`` a resource (a thread's messages, stream, files), ``write`` to it (send a message,
#: rename, upload), ``create`` one, ``delete`` one, ``list`` them, ``approve`` a paused call
AuthorizationAction = Literal["read", "write", "create", "delete", "list", "approve"]


@dataclass(frozen=True, slots=True)
class AuthorizationCaller:
    """Who asks: the user id, name and admin role, and (from an identity provider's token)
    the tenant, roles and every claim."""

    id: str
    name: str
    is_admin: bool = False
    email: str | None = None
    tenant: str | None = None
    roles: tuple[str, ...] = ()
    claims: Mapping[str, Any] = field(default_factory=dict)

    @property
    def isAdmin(self) -> bool:
        return self.is_admin


@dataclass(frozen=True, slots=True)
class AuthorizationResource:
    """What is asked about: its kind and id, its owner and metadata when it has them, and the
    thread it belongs to (a file's, an approval's)."""

    kind: ResourceKind
    id: str | None = None
    owner: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    agent: str | None = None
    thread_id: str | None = None


@dataclass(frozen=True, slots=True)
class AuthorizationRequest:
    """One question to the handler. ``default`` is what the built-in policy answers (a thread's
    owner or an admin), so a handler may add a rule and defer to it otherwise."""

    caller: AuthorizationCaller | None
    resource: AuthorizationResource
    action: AuthorizationAction
    default: bool = False


@dataclass(frozen=True, slots=True)
class Allow:
    """The caller may do it."""


@dataclass(frozen=True, slots=True)
class Deny:
    """The caller may not; ``reason`` is shown in the 403."""

    reason: str = "the authorization policy refuses this"


@dataclass(frozen=True, slots=True)
class Narrow:
    """Allowed only where the resource's metadata holds every key and value of ``metadata``."""

    metadata: Mapping[str, Any]

    def matches(self, metadata: Mapping[str, Any] | None) -> bool:
        held = metadata or {}
        return all(key in held and held[key] == value for key, value in self.metadata.items())


Decision: TypeAlias = "bool | Allow | Deny | Narrow | None"
AuthorizationHandler = Callable[[AuthorizationRequest], "Decision | Awaitable[Decision]"]


class AuthorizationDefinition(Definition):
    """The project's authorization handler (see the module's docstring)."""

    name: str = "authorization"
    handler: Callable[..., Any]

    async def decide(self, request: AuthorizationRequest) -> Allow | Deny | Narrow | None:
        """The handler's answer, normalised; anything else it returns is a
        :class:`~standardagents.exceptions.DefinitionError` (a refusal never passes silently)."""
        answer = self.handler(request)
        if inspect.isawaitable(answer):
            answer = await answer
        if answer is None or isinstance(answer, Allow | Deny | Narrow):
            return answer
        if answer is True:
            return Allow()
        if answer is False:
            return Deny()
        raise DefinitionError([("handler", f"returned {answer!r}: an authorization handler answers None, "
                                           "True, False, Allow(), Deny(reason) or Narrow(metadata={...})")],
                              source=self.source_file or f"authorization {self.name!r}")


def define_authorization(handler: AuthorizationHandler, *, name: str = "authorization") -> AuthorizationDefinition:
    """Define the project's authorization handler (put it in ``agents/authorization/``)."""
    if not callable(handler):
        raise DefinitionError([("handler", f"must be a function taking an AuthorizationRequest (got {handler!r})")],
                              source=f"authorization {name!r}")
    return AuthorizationDefinition(name=name, handler=handler)
