"""The engine: threads, executions, sides and stop conditions, tools and hooks."""

from .effects import EffectScheduler
from .handle import StartOptions, Turn, TurnStatus
from .hooks import HookExecutionContext, HookSet
from .loop import Execution, ExecutionResult
from .runtime import Runtime, SideSetup
from .state import ExecutionState, ThreadState

__all__ = [
    "EffectScheduler",
    "Execution",
    "ExecutionResult",
    "ExecutionState",
    "HookExecutionContext",
    "HookSet",
    "Runtime",
    "SideSetup",
    "StartOptions",
    "ThreadState",
    "Turn",
    "TurnStatus",
]
