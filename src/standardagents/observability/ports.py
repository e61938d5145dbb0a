"""What observability needs of an execution, as a Protocol: the engine's ``Execution``
satisfies it, and observability (a layer the engine's parts call into) never imports the
step loop that defines it."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..definitions import AgentDefinition
    from ..engine.results import ExecutionResult
    from ..providers.base import ModelProvider
    from ..records import ExecutionRecord

__all__ = ["ProviderSource", "StepCount", "TracedExecution"]


class ProviderSource(Protocol):
    """The runtime, as far as a span asks it: which provider serves a model definition."""

    def provider_for(self, model: Any) -> ModelProvider: ...


class StepCount(Protocol):
    @property
    def step_count(self) -> int: ...


class TracedExecution(Protocol):
    """One execution as its spans and instruments see it."""

    @property
    def thread_id(self) -> str: ...

    @property
    def record(self) -> ExecutionRecord: ...

    @property
    def agent(self) -> AgentDefinition: ...

    @property
    def resume(self) -> dict[str, Any] | None: ...

    @property
    def ex(self) -> StepCount: ...

    @property
    def rt(self) -> ProviderSource: ...

    def run(self) -> Coroutine[Any, Any, ExecutionResult]: ...
