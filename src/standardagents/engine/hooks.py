"""Which hooks are active for a thread, with their provenance, and calling them.

A prompt's hook list replaces the agent's fallback list (``source.kind`` is ``prompt`` or
``agent``). Parent hooks contributed by child agents carry ``source.kind == "child"`` and run
before or after that set (their ``stage``).

Each hook that runs inside an execution is noted on it (name, event, duration, outcome), so
the step records list what ran; a thread without hooks never gets that far.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from .. import observability as observe
from ..definitions import HookDefinition
from .state import ThreadState

__all__ = ["ActiveHook", "HookExecutionContext", "HookSet"]

log = logging.getLogger("standardagents.hooks")


@dataclass(slots=True, frozen=True)
class HookExecutionContext:
    """The final argument of every thread hook: why this hook is active."""

    source: dict[str, Any]


@dataclass(slots=True)
class ActiveHook:
    definition: HookDefinition
    context: HookExecutionContext


@dataclass
class HookSet:
    """Active hooks grouped by hook name, in call order."""

    by_name: dict[str, list[ActiveHook]] = field(default_factory=dict)

    def add(self, definition: HookDefinition, source: dict[str, Any]) -> None:
        self.by_name.setdefault(definition.hook, []).append(ActiveHook(definition, HookExecutionContext(source)))

    def has(self, name: str) -> bool:
        return name in self.by_name

    def get(self, name: str) -> list[ActiveHook]:
        return self.by_name.get(name, [])

    async def notify(self, name: str, *args: Any) -> None:
        """Observational hooks: every one runs; a failure is logged, never raised."""
        for active in self.by_name.get(name, ()):
            started = time.perf_counter()
            try:
                with observe.hook(name, active.definition.id):
                    await active.definition.call(*args, active.context)
            except Exception as exc:
                log.exception("hook %s (%s) failed", active.definition.id, name)
                _note(args[0] if args else None, active, name, started, "error", exc)
            else:
                _note(args[0] if args else None, active, name, started, "ok")

    async def transform(self, name: str, state: Any, value: Any, *extra: Any, strict: bool = False) -> Any:
        """Transforming hooks: each gets the previous one's output; ``None`` keeps the value.

        With ``strict`` a failing hook raises (inject_message); otherwise the failure is
        logged and the last good value is kept.
        """
        for active in self.by_name.get(name, ()):
            started = time.perf_counter()
            try:
                args = (state, *extra, value) if extra else (state, value)
                with observe.hook(name, active.definition.id):
                    result = await active.definition.call(*args, active.context)
            except Exception as exc:
                _note(state, active, name, started, "error", exc)
                if strict:
                    raise
                log.exception("hook %s (%s) failed; keeping the last good value", active.definition.id, name)
                continue
            changed = result is not None and result is not value
            _note(state, active, name, started, "changed" if changed else "ok")
            if result is not None:
                value = result
        return value


def _note(state: Any, active: ActiveHook, event: str, started: float, outcome: str,
          error: BaseException | None = None) -> None:
    """Note a hook that ran inside an execution, for the step records (see ``ExecutionState.note_hook``)."""
    ex = state.execution if isinstance(state, ThreadState) else None
    if ex is not None:
        ex.note_hook(active.definition.id, event, time.perf_counter() - started, outcome,
                     None if error is None else f"{type(error).__name__}: {error}")
