"""The ``Store`` protocol: everything the runtime persists goes through it.

One SQL implementation (:mod:`standardagents.store.sql`) serves SQLite and PostgreSQL.
Every method is a unit of work: it either commits whole or raises
:class:`~standardagents.exceptions.StoreError` leaving nothing behind.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..files import FileChunk, FileStats, FindResult, GrepResult, ReaddirResult
from ..records import ExecutionRecord, Fence, FileRecord, LogRecord, Message, ThreadRecord
from .records import ApiTokenRecord, EffectRecord, SubagentRecord, UserRecord

__all__ = [
    "ApiTokenRecord",
    "EffectRecord",
    "Store",
    "SubagentRecord",
    "ToolResultRow",
    "UserRecord",
]


class ToolResultRow(dict[str, Any]):
    """A stored tool result: ``id, thread_id, message_id, tool_call_id, tool_name,
    arguments, status, result, error, stack, attachments, metadata, created_at``."""


@runtime_checkable
class Store(Protocol):
    """Persistence for threads, messages, tool results, executions, logs, files, env values,
    users and API tokens, user values, scheduled effects and subagent links."""

    url: str

    async def open(self) -> None:
        """Connect and bring the schema to the newest migration."""

    async def close(self) -> None:
        """Release connections."""

    async def ping(self) -> None:
        """Run the cheapest round trip to the database; raise when it does not answer
        (readiness probes)."""

    # threads
    async def create_thread(self, thread: ThreadRecord) -> ThreadRecord: ...
    async def get_thread(self, thread_id: str) -> ThreadRecord | None: ...
    async def list_threads(
        self, *, agent: str | None = None, user_id: str | None = None,
        parent_id: str | None = None, top_level: bool = False, limit: int = 50, offset: int = 0,
    ) -> list[ThreadRecord]:
        """Newest first; ``top_level`` leaves out child threads (those with a parent, such as
        a subagent's), so a list of conversations is not crowded by their inner runs."""
        ...
    async def update_thread(self, thread_id: str, **changes: Any) -> ThreadRecord: ...
    async def delete_thread(self, thread_id: str) -> bool: ...

    # messages
    async def add_message(self, message: Message) -> Message: ...
    async def get_message(self, message_id: str) -> Message | None:
        """The message; raises ``NotFoundError`` for an unknown id."""
        ...
    async def update_message(self, message_id: str, changes: dict[str, Any]) -> Message: ...
    async def list_messages(
        self, thread_id: str, *, limit: int | None = None, offset: int = 0,
        include_silent: bool = True, include_hidden: bool = True, newest_first: bool = False,
    ) -> list[Message]: ...
    async def list_context_messages(self, thread_id: str) -> list[Message]:
        """The messages from the thread's oldest one not hidden on (from its newest when all
        are hidden), oldest first: the part of the history a model context can hold, read
        in time bounded by its length, not the thread's."""
        ...
    async def message_positions(self, thread_id: str, message_ids: list[str]) -> dict[str, int]:
        """The ``seq`` of each of these messages of the thread that exists."""
        ...
    async def delete_messages(self, thread_id: str, message_ids: list[str]) -> int:
        """Delete these messages of the thread (and their tool results) in one transaction;
        returns how many messages went."""
        ...
    async def count_messages(self, thread_id: str, *, include_silent: bool = True) -> int: ...

    async def commit_step(
        self,
        *,
        messages: list[Message] = ...,
        updates: list[tuple[str, dict[str, Any]]] = ...,
        tool_results: list[dict[str, Any]] = ...,
        execution: ExecutionRecord | None = None,
        fence: Fence | None = None,
    ) -> list[Message]:
        """Insert messages, apply message updates, insert tool results and upsert the
        execution in ONE transaction; returns the inserted messages with ``seq`` set.

        The step is fenced: by the execution record's epoch, or by ``fence`` when no record
        is written. If that execution's stored epoch moved on (another process took it over)
        nothing is written and :class:`~standardagents.exceptions.ExecutionTakenOver` is raised."""
        ...

    async def list_tool_results(self, thread_id: str, *, tool_call_id: str | None = None) -> list[dict[str, Any]]: ...
    async def list_usage(self, *, thread_id: str | None = None, user_id: str | None = None,
                         agent: str | None = None, since: int | None = None,
                         until: int | None = None) -> list[dict[str, Any]]:
        """Model replies with usage (``thread_id``, ``agent``, ``user_id``, ``created_at``,
        ``usage``, ``cost``, ``model``), oldest first, for usage summaries."""
        ...

    # executions
    async def save_execution(self, execution: ExecutionRecord) -> None:
        """Insert or update ``execution``; an update only while the stored epoch is still the
        record's, else :class:`~standardagents.exceptions.ExecutionTakenOver`."""
        ...

    async def replace_execution(self, execution: ExecutionRecord, *, expected_status: str,
                                expected_updated_at: int) -> bool:
        """Save ``execution`` only if the stored row still has that status and ``updated_at``
        (compare-and-set across processes); False when another writer changed it first."""
        ...

    async def touch_executions(self, held: list[Fence], now: int) -> list[str]:
        """Refresh ``updated_at`` of the running executions still at the epochs held (a
        heartbeat); returns the ids of those another process took over meanwhile."""
        ...

    async def get_execution(self, execution_id: str) -> ExecutionRecord | None: ...
    async def list_executions(self, *, thread_id: str | None = None, status: str | None = None) -> list[ExecutionRecord]: ...

    # logs
    async def add_log(self, log: LogRecord) -> LogRecord: ...
    async def list_logs(self, thread_id: str, *, limit: int = 100, offset: int = 0) -> list[LogRecord]: ...

    # event log (recent live events, replayed to clients that reconnect)
    async def append_events(self, rows: list[tuple[str, int, int, int, str, float]]) -> int: ...
    async def read_events(self, stream: str, after: int, *,
                          limit: int = 10_000) -> tuple[int, list[tuple[int, str, Any, float]]]: ...
    async def prune_events(self, streams: list[str], keep: int, before_ts: float | None) -> int: ...
    async def log_ending(self, execution: ExecutionRecord, expected_updated_at: int,
                         rows: list[tuple[str, int, int, int, str, float]]) -> bool:
        """Compare-and-set an ended execution (its status, ``expected_updated_at``) and store
        event batches in the same transaction; False, with nothing written, when another
        writer changed the execution first."""
        ...

    # thread files
    async def write_file(self, thread_id: str, path: str, data: bytes, *, mime_type: str | None = None,
                         metadata: dict[str, Any] | None = None) -> FileRecord: ...
    async def read_file(self, thread_id: str, path: str) -> bytes | None: ...
    async def stat_file(self, thread_id: str, path: str) -> FileRecord | None: ...
    async def list_files(self, thread_id: str, prefix: str = "") -> list[FileRecord]: ...
    async def delete_file(self, thread_id: str, path: str) -> bool: ...
    async def stat_path(self, thread_id: str, path: str) -> FileStats | None:
        """A file, or a directory implied by the files under it; ``None`` when neither."""
        ...
    async def readdir(self, thread_id: str, path: str = "/") -> ReaddirResult | None:
        """A directory's immediate children; ``None`` when no file lies under it."""
        ...
    async def find_files(self, thread_id: str, pattern: str, *, limit: int = 1000) -> FindResult:
        """Files matching a glob (``*``, ``?``, ``[...]``, ``**``), reading no content."""
        ...
    async def grep_files(self, thread_id: str, pattern: str, *, ignore_case: bool = False,
                         glob: str | None = None, max_matches: int = 1000) -> GrepResult:
        """Lines matching a regex, with paths and line numbers; files read a slice at a time."""
        ...
    async def read_file_chunk(self, thread_id: str, path: str, offset: int, length: int) -> FileChunk | None:
        """``length`` bytes from ``offset``, sliced by the database; ``None`` when no file."""
        ...

    # env values, scoped: ("thread", id), ("user", id), ("instance", ""), ("inbox", thread id),
    # ("lock", ""), ("system", "") (the runtime's own values)
    async def set_env(self, scope: str, scope_id: str, key: str, value: Any) -> None: ...
    async def get_env(self, scope: str, scope_id: str, key: str) -> Any: ...
    async def list_env(self, scope: str, scope_id: str) -> dict[str, Any]: ...
    async def delete_env(self, scope: str, scope_id: str, key: str) -> bool: ...
    async def claim_env(self, scope: str, scope_id: str, key: str, value: Any, now: int,
                        stale_before: int | None = None) -> bool:
        """Write ``key`` only if absent (or last written before ``stale_before``): an atomic
        claim across processes. True when this call wrote it."""
        ...

    async def release_env(self, scope: str, scope_id: str, key: str, owner: str | None = None) -> bool:
        """Delete a claim made with :meth:`claim_env` (with ``owner``: only while the claim's
        value names that owner, so a claim another process took over stays)."""
        ...

    async def touch_env(self, scope: str, scope_id: str, keys: list[str], now: int, owner: str | None = None) -> int:
        """Refresh when some keys of a scope were last written (keeps claims alive; with
        ``owner``, only the claims that owner still holds)."""
        ...

    async def list_scope(self, scope: str) -> list[tuple[str, str, Any]]:
        """Every ``(scope_id, key, value)`` of one scope (``inbox``: messages waiting for a
        busy thread), oldest first."""
        ...

    # users and API tokens (only a SHA-256 of each token is stored)
    async def create_user(self, name: str, *, email: str | None = None, is_admin: bool = False,
                          user_id: str | None = None) -> UserRecord: ...
    async def get_user(self, user_id: str) -> UserRecord | None: ...
    async def get_user_by_email(self, email: str) -> UserRecord | None: ...
    async def list_users(self) -> list[UserRecord]: ...
    async def create_api_token(self, user_id: str, name: str) -> tuple[ApiTokenRecord, str]:
        """A new token; the plaintext is returned once (second item) and never stored."""
        ...
    async def verify_api_token(self, plaintext: str) -> UserRecord | None: ...
    async def list_api_tokens(self, user_id: str | None = None) -> list[ApiTokenRecord]: ...
    async def revoke_api_token(self, token_id: str) -> bool: ...

    # per-user values
    async def set_user_value(self, user_id: str, key: str, value: Any) -> None: ...
    async def get_user_value(self, user_id: str, key: str) -> Any: ...
    async def list_user_values(self, user_id: str) -> dict[str, Any]: ...
    async def delete_user_value(self, user_id: str, key: str) -> bool: ...

    # scheduled effects: claimed with a lease so each runs once across workers
    async def schedule_effect(self, thread_id: str, name: str, args: Any = None, *,
                              run_at: int | None = None, effect_id: str | None = None,
                              trace: dict[str, str] | None = None) -> EffectRecord: ...
    async def get_effect(self, effect_id: str) -> EffectRecord | None: ...
    async def claim_due_effects(self, now: int, worker_id: str, limit: int = 10,
                                lease_ms: int = 60_000) -> list[EffectRecord]: ...
    async def renew_effect(self, effect_id: str, worker_id: str, claimed_until: int) -> bool: ...
    async def finish_effect(self, effect_id: str, result: Any = None, *,
                            worker_id: str | None = None) -> bool: ...
    async def fail_effect(self, effect_id: str, error: str, retry_at: int | None = None, *,
                          worker_id: str | None = None) -> bool: ...
    async def cancel_effect(self, effect_id: str) -> bool: ...
    async def list_effects(self, *, thread_id: str | None = None,
                           status: str | None = None) -> list[EffectRecord]: ...

    # subagent links
    async def add_subagent(self, link: SubagentRecord) -> SubagentRecord: ...
    async def update_subagent(self, subagent_id: str, **changes: Any) -> SubagentRecord: ...
    async def get_subagent(self, subagent_id: str) -> SubagentRecord | None: ...
    async def list_subagents(self, parent_thread_id: str) -> list[SubagentRecord]: ...
