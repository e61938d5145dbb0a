"""The shapes of a code execution: what was asked, with which limits, and what came back.

Named after the spec's exports (``CodeExecution``, ``CodeExecutionOptions``,
``CodeExecutionResult``, ``CodeExecutionStatus``, ``CodeExecutionLog``,
``CodeExecutionError``); ``to_dict`` gives their wire shape (camelCase).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "DEFAULT_MEMORY_LIMIT",
    "DEFAULT_TIMEOUT",
    "LANGUAGES",
    "CodeExecution",
    "CodeExecutionError",
    "CodeExecutionLog",
    "CodeExecutionOptions",
    "CodeExecutionResult",
    "CodeExecutionStatus",
    "Language",
]

#: completed: the code ran to its end; error: it raised; timeout: the wall-time limit ended it;
#: killed: the sandbox was ended for another reason (memory or output over the limit, a crash)
CodeExecutionStatus = Literal["completed", "error", "timeout", "killed"]
Language = Literal["python", "javascript", "typescript"]
LANGUAGES: tuple[str, ...] = ("python", "javascript", "typescript")

#: seconds of wall time one execution may take (not counting a cold sandbox start)
DEFAULT_TIMEOUT = 30.0
#: bytes of resident memory the sandbox process may reach during one execution
DEFAULT_MEMORY_LIMIT = 1024 * 1024 * 1024


@dataclass(slots=True)
class CodeExecutionOptions:
    """Limits and inputs of one execution.

    ``files``: which thread files to put in the sandbox's workspace: ``None`` for all of
    them, else a list of paths or globs (``[]`` for none). Files the code creates, changes
    or deletes there are written back to the thread when it completes or raises.
    """

    language: Language = "python"
    timeout: float = DEFAULT_TIMEOUT
    memory_limit: int = DEFAULT_MEMORY_LIMIT
    network: bool = False
    files: list[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"language": self.language, "timeout": self.timeout, "memoryLimit": self.memory_limit,
                "network": self.network, "files": self.files}


@dataclass(slots=True)
class CodeExecution:
    """One request: the code and its options."""

    code: str
    options: CodeExecutionOptions = field(default_factory=CodeExecutionOptions)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, **self.options.to_dict()}


@dataclass(slots=True)
class CodeExecutionLog:
    """A line the code wrote: ``stream`` is ``stdout`` or ``stderr``; ``time`` in epoch ms."""

    stream: Literal["stdout", "stderr"]
    message: str
    time: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"stream": self.stream, "message": self.message, "time": self.time}


@dataclass(slots=True)
class CodeExecutionError:
    """Why an execution did not complete: the exception's name, message and stack."""

    name: str
    message: str
    stack: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "message": self.message, "stack": self.stack}


@dataclass(slots=True)
class CodeExecutionResult:
    """What came back. ``result`` is the value of Python's last expression, or a JavaScript
    module's ``default`` export, as JSON (its ``repr``/inspection when not JSON-able).
    ``files_written`` and ``files_deleted`` list the thread files the run changed."""

    status: CodeExecutionStatus
    result: Any = None
    logs: list[CodeExecutionLog] = field(default_factory=list)
    error: CodeExecutionError | None = None
    duration_ms: float = 0.0
    files_written: list[str] = field(default_factory=list)
    files_deleted: list[str] = field(default_factory=list)

    @property
    def stdout(self) -> str:
        return "\n".join(log.message for log in self.logs if log.stream == "stdout")

    @property
    def stderr(self) -> str:
        return "\n".join(log.message for log in self.logs if log.stream == "stderr")

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "result": self.result, "logs": [log.to_dict() for log in self.logs],
                "error": self.error.to_dict() if self.error else None, "durationMs": round(self.duration_ms, 3),
                "filesWritten": list(self.files_written), "filesDeleted": list(self.files_deleted)}
