"""The exceptions standardagents raises, in one tree.

Three families are kept apart so callers can tell a mistake they must fix from a
failure at run time and from a signal the engine uses to steer a turn::

    StandardAgentsError
    ├── DefinitionError            a definition or project does not validate (user's mistake)
    │   └── ProjectError           a project folder cannot be loaded (file, reference, duplicate)
    ├── NotFoundError              a named thing (agent, thread, message, tool...) does not exist
    ├── AuthenticationFailed       a caller's credentials (an identity provider's token) were refused
    ├── AccessDenied               the authorization policy refused a caller an action on a resource
    ├── RuntimeFailure             something failed while running
    │   ├── ProviderError          a model endpoint failed (status, body, retriable)
    │   ├── StoreError             the database refused or failed a write
    │   │   ├── UnstorableValueError   a value no database may hold (NUL, surrogate, too long)
    │   │   ├── ExecutionTakenOver     a write of a turn this process no longer owns (fenced)
    │   │   └── StoreUnavailable       the database could not be reached (connection lost or refused)
    │   └── ToolExecutionError     a tool raised; carries the original exception
    ├── ThreadBusyError            a message came while a turn runs and the busy policy is "reject"
    ├── ShuttingDownError          a new turn asked of a runtime that is draining for a shutdown
    ├── QuotaExceeded              a turn over its user's or tenant's quota (retry after some seconds)
    ├── InjectionRejected          a before_create_message hook refused an inject_message call
    └── ControlSignal              raised inside tools/hooks to steer the engine, never a failure
        └── ModelRetry             ask the model to try the call again with a message
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AccessDenied",
    "AuthenticationFailed",
    "ControlSignal",
    "DefinitionError",
    "ExecutionTakenOver",
    "InjectionRejected",
    "ModelRetry",
    "NotFoundError",
    "ProjectError",
    "ProviderError",
    "QuotaExceeded",
    "RuntimeFailure",
    "ShuttingDownError",
    "StandardAgentsError",
    "StoreError",
    "StoreUnavailable",
    "ThreadBusyError",
    "ToolExecutionError",
    "UnstorableValueError",
]


class StandardAgentsError(Exception):
    """Root of every error this package raises on purpose."""


class DefinitionError(StandardAgentsError):
    """A definition does not validate.

    ``problems`` lists every problem at once as ``(location, message)`` pairs, where the
    location names the file (when known) and the field, so a user fixes all in one pass.
    """

    def __init__(self, problems: list[tuple[str, str]] | str, *, source: str | None = None) -> None:
        if isinstance(problems, str):
            problems = [("", problems)]
        self.problems = problems
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        lines = []
        for where, msg in self.problems:
            prefix = f"{self.source}: " if self.source else ""
            lines.append(f"{prefix}{where}: {msg}" if where else f"{prefix}{msg}")
        return "\n".join(lines)


class ProjectError(DefinitionError):
    """A project folder cannot be loaded or references something that does not exist."""


class AuthenticationFailed(StandardAgentsError):
    """Credentials were presented and refused; the message is the one reason (never the token)."""


class AccessDenied(StandardAgentsError):
    """The authorization policy refused the caller this action on this resource."""


class NotFoundError(StandardAgentsError):
    """A named thing does not exist (or is not visible from the asking namespace)."""

    def __init__(self, kind: str, name: str, detail: str = "") -> None:
        self.kind = kind
        self.name = name
        super().__init__(f"unknown {kind} {name!r}" + (f": {detail}" if detail else ""))


class ThreadBusyError(StandardAgentsError):
    """A message was refused because its thread runs a turn and the busy policy (the
    agent's ``busy`` or the request's) is ``reject``; nothing was stored."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(f"thread {thread_id} is running a turn and refuses new messages until it ends "
                         "(busy policy 'reject')")


class ShuttingDownError(StandardAgentsError):
    """A new turn was refused because this runtime is shutting down (draining its turns);
    nothing was stored. Another worker, or this one once restarted, takes it."""

    def __init__(self) -> None:
        super().__init__("this worker is shutting down and starts no new turns; send the message again "
                         "(another worker takes it)")
        #: answered with the 503 over HTTP: a client may retry at once
        self.headers = {"Retry-After": "1"}


class QuotaExceeded(StandardAgentsError):
    """A turn was refused because its user (or tenant) is over a quota; nothing was stored.
    ``retry_after`` says in how many seconds the quota allows it (429 over HTTP)."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = max(1, int(retry_after + 0.999))
        self.headers = {"Retry-After": str(self.retry_after)}


class RuntimeFailure(StandardAgentsError):
    """Something failed while running a thread."""


class ProviderError(RuntimeFailure):
    """A model endpoint failed.

    ``retriable`` is true for failures worth another attempt or a fallback model
    (connection lost, timeouts, 408/409/429/5xx); ``status`` and ``body`` carry what
    the endpoint said, so the message a user sees is actionable.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: Any = None,
        retriable: bool = False,
        code: str = "provider_error",
        before_first_token: bool = True,
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        #: seconds the endpoint asked to wait before another attempt (its Retry-After)
        self.retry_after = retry_after
        self.body = body
        self.retriable = retriable
        self.code = code
        self.before_first_token = before_first_token
        super().__init__(message)


class StoreError(RuntimeFailure):
    """The database refused or failed an operation."""


class ExecutionTakenOver(StoreError):
    """A write of a running execution found that another process took the execution over
    (its epoch moved on): nothing of that write was stored, and the turn goes on there, not
    here. The process that lost it stops the turn without settling it."""

    def __init__(self, execution_id: str, epoch: int) -> None:
        self.execution_id = execution_id
        self.epoch = epoch
        super().__init__(f"execution {execution_id} was taken over by another process "
                         f"(this process held it at epoch {epoch}); nothing was written")


class StoreUnavailable(StoreError):
    """The database could not be reached: the connection was lost, refused or reset. Whether
    the operation took effect is unknown, so a running turn that meets it stops without
    settling (another process, or this one once the database answers, goes on with it)."""


class UnstorableValueError(StoreError):
    """A value was refused before reaching the database: text with a NUL character or an
    unpaired surrogate, a key or path over its size, a number out of range, JSON with NaN.
    Nothing was written; ``field`` names what to fix. The caller's mistake, not a failure."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


class ToolExecutionError(RuntimeFailure):
    """A tool raised; ``original`` is what it raised."""

    def __init__(self, tool: str, original: BaseException) -> None:
        self.tool = tool
        self.original = original
        super().__init__(f"tool {tool!r} failed: {original}")


class InjectionRejected(StandardAgentsError):
    """A ``before_create_message`` hook raised during ``inject_message``; nothing was stored."""


class ControlSignal(StandardAgentsError):
    """Raised by user code to steer the engine; never reported as a failure."""


class ModelRetry(ControlSignal):
    """Raised by a tool to hand the model a message and let it try again."""
