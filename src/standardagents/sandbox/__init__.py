"""Run untrusted code in a real sandbox: Python on Pyodide and JavaScript/TypeScript, on Deno.

``ThreadState.run_code`` (tools, hooks, endpoints) and the built-in ``run_code`` tool use
it; :func:`execute` runs code without a thread. Needs the ``sandbox`` extra
(``pip install 'standardagents[sandbox]'``), which brings the ``deno`` binary; Pyodide is
fetched once from the npm registry into the sandbox cache (``python -m
standardagents.sandbox warm`` does it ahead of time).
"""

from __future__ import annotations

from .pool import SandboxPool, default_pool, execute
from .process import SandboxUnavailable, deno_binary, warm_cache
from .types import (
    CodeExecution,
    CodeExecutionError,
    CodeExecutionLog,
    CodeExecutionOptions,
    CodeExecutionResult,
    CodeExecutionStatus,
)

__all__ = [
    "CodeExecution",
    "CodeExecutionError",
    "CodeExecutionLog",
    "CodeExecutionOptions",
    "CodeExecutionResult",
    "CodeExecutionStatus",
    "SandboxPool",
    "SandboxUnavailable",
    "default_pool",
    "deno_binary",
    "execute",
    "warm_cache",
]
