"""The engine: threads, executions, sides and stop conditions, tools and hooks."""

from .effects import EffectScheduler
from .handle import Turn, TurnStatus
from .hooks import HookExecutionContext, HookSet
from .loop import Execution, ExecutionResult
from .options import StartOptions, TurnOptions, TurnRequest
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
    "TurnOptions",
    "TurnRequest",
    "TurnStatus",
]
