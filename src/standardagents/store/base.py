"""The ``Store`` protocol: everything the runtime persists goes through it.

One SQL implementation (:mod:`standardagents.store.sql`) serves SQLite and PostgreSQL.
Every method is a unit of work: it either commits whole or raises
:class:`~standardagents.exceptions.StoreError` leaving nothing behind.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..records import ExecutionRecord, FileRecord, LogRecord, Message, ThreadRecord

__all__ = ["Store", "ToolResultRow"]


class ToolResultRow(dict[str, Any]):
    """A stored tool result: ``id, thread_id, message_id, tool_call_id, tool_name,
    arguments, status, result, error, stack, attachments, metadata, created_at``."""


@runtime_checkable
class Store(Protocol):
    """Persistence for threads, messages, tool results, executions, logs, files and env values."""

    url: str

    async def open(self) -> None:
        """Connect and bring the schema to the newest migration."""

    async def close(self) -> None:
        """Release connections."""

    # threads
    async def create_thread(self, thread: ThreadRecord) -> ThreadRecord: ...
    async def get_thread(self, thread_id: str) -> ThreadRecord | None: ...
    async def list_threads(
        self, *, agent: str | None = None, user_id: str | None = None,
        parent_id: str | None = None, limit: int = 50, offset: int = 0,
    ) -> list[ThreadRecord]: ...
    async def update_thread(self, thread_id: str, **changes: Any) -> ThreadRecord: ...
    async def delete_thread(self, thread_id: str) -> bool: ...

    # messages
    async def add_message(self, message: Message) -> Message: ...
    async def get_message(self, message_id: str) -> Message | None: ...
    async def update_message(self, message_id: str, changes: dict[str, Any]) -> Message: ...
    async def list_messages(
        self, thread_id: str, *, limit: int | None = None, offset: int = 0,
        include_silent: bool = True, include_hidden: bool = True, newest_first: bool = False,
    ) -> list[Message]: ...
    async def count_messages(self, thread_id: str, *, include_silent: bool = True) -> int: ...

    async def commit_step(
        self,
        *,
        messages: list[Message] = ...,
        updates: list[tuple[str, dict[str, Any]]] = ...,
        tool_results: list[dict[str, Any]] = ...,
        execution: ExecutionRecord | None = None,
    ) -> list[Message]:
        """Insert messages, apply message updates, insert tool results and upsert the
        execution in ONE transaction; returns the inserted messages with ``seq`` set."""
        ...

    async def list_tool_results(self, thread_id: str, *, tool_call_id: str | None = None) -> list[dict[str, Any]]: ...

    # executions
    async def save_execution(self, execution: ExecutionRecord) -> None: ...
    async def get_execution(self, execution_id: str) -> ExecutionRecord | None: ...
    async def list_executions(self, *, thread_id: str | None = None, status: str | None = None) -> list[ExecutionRecord]: ...

    # logs
    async def add_log(self, log: LogRecord) -> LogRecord: ...
    async def list_logs(self, thread_id: str, *, limit: int = 100, offset: int = 0) -> list[LogRecord]: ...

    # thread files
    async def write_file(self, thread_id: str, path: str, data: bytes, *, mime_type: str | None = None,
                         metadata: dict[str, Any] | None = None) -> FileRecord: ...
    async def read_file(self, thread_id: str, path: str) -> bytes | None: ...
    async def stat_file(self, thread_id: str, path: str) -> FileRecord | None: ...
    async def list_files(self, thread_id: str, prefix: str = "") -> list[FileRecord]: ...
    async def delete_file(self, thread_id: str, path: str) -> bool: ...

    # env values, scoped: ("thread", id), ("user", id), ("instance", "")
    async def set_env(self, scope: str, scope_id: str, key: str, value: Any) -> None: ...
    async def get_env(self, scope: str, scope_id: str, key: str) -> Any: ...
    async def list_env(self, scope: str, scope_id: str) -> dict[str, Any]: ...
    async def delete_env(self, scope: str, scope_id: str, key: str) -> bool: ...
