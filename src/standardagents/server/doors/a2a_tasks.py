"""A2A tasks kept in our store, so any worker (and a restarted server) answers for them.

An A2A task is one of our executions (same id) and its ``contextId`` our thread; the task
object the A2A SDK builds (status, history, artifacts) is stored beside them, in the store's
env table, with a version per write:

- :class:`StoreTaskStore` is the SDK's ``VersionedTaskStore``: a write names the version it
  derives from and fails when another worker wrote meanwhile (the next version's key is
  claimed atomically, ``claim_env``), so a cancel from one worker is seen by the worker
  running the task. A read of a task whose execution ended without the task saying so (the
  worker following it went away) reports the execution's end.
- :class:`BusTaskEventStream` is the SDK's ``TaskEventStream`` over our event bus (carried
  between workers by the PostgreSQL relay): a client resubscribing on another worker than
  the one running the task follows it there.

Retention: a task that ended (``completed``, ``failed``, ``canceled``, ``rejected``, or whose
execution ended without the task being told) is deleted from the store once it ended
``retention`` seconds ago (``STANDARDAGENTS_A2A_TASK_RETENTION``, default 7 days, ``off``
keeps them for ever); its thread and executions stay, its push-notification configs go with it.
A task waiting for input is kept.
Deleting runs when a task is created, at most once per ``min(retention, 1 hour)`` per process.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, Any

from a2a.server.cluster.event_stream import TaskEventStream, VersionedEvent
from a2a.server.cluster.task_store import (
    ConcurrentTaskModificationError,
    StoredTask,
    VersionedTaskStore,
)
from a2a.server.cluster.version import TaskVersion
from a2a.server.owner_resolver import resolve_user_scope
from a2a.types import (
    Artifact,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import MessageToDict, ParseDict

from ...exceptions import DefinitionError
from ...records import new_id, now_ms
from ...store import serviceops as ops
from ...store.serviceops import run_op

if TYPE_CHECKING:
    from a2a.server.context import ServerCallContext

    from ...engine.runtime import Runtime

__all__ = [
    "DEFAULT_RETENTION",
    "RETENTION_ENV",
    "BusTaskEventStream",
    "StoreTaskStore",
    "end_execution",
    "retention_from_env",
]

log = logging.getLogger("standardagents.a2a")

#: seconds a task that ended is kept (7 days)
DEFAULT_RETENTION = 7 * 24 * 3600.0
RETENTION_ENV = "STANDARDAGENTS_A2A_TASK_RETENTION"
#: the longest time between two passes deleting old tasks (seconds)
_PRUNE_EVERY = 3600.0

_SCOPE = "system"
#: under "a2a_task:<task id>": "current" (the task, its owner and version) and "v<n>" (claims)
#: under "a2a_tasks_of:<owner>": the owner's task ids (for tasks/list)
#: under "a2a_tasks": every task id -> {"owner", "at": created, "ended": ms or None} (for retention)
_INDEX = "a2a_tasks"
_TERMINAL = {TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_FAILED,
             TaskState.TASK_STATE_REJECTED}
_EVENTS = {"task": Task, "message": Message, "status": TaskStatusUpdateEvent, "artifact": TaskArtifactUpdateEvent}
_EVENT_TYPE = "a2a.task_event"


def retention_from_env() -> float | None:
    """Seconds a task that ended is kept, from ``STANDARDAGENTS_A2A_TASK_RETENTION`` (default
    :data:`DEFAULT_RETENTION`; ``off`` keeps tasks for ever: ``None``)."""
    raw = os.environ.get(RETENTION_ENV, "").strip().lower()
    if not raw:
        return DEFAULT_RETENTION
    if raw in ("off", "none", "never"):
        return None
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        raise DefinitionError([(RETENTION_ENV, f"a number of seconds (0 or more) or 'off', not {raw!r}")])
    return seconds


def _version(value: Any) -> int:
    return int(value) if isinstance(value, int) else 0


def _as_int(version: TaskVersion) -> int:
    if version.is_missing:
        return 0
    return int(version._value)


class StoreTaskStore(VersionedTaskStore):
    """The SDK's task store over our store (see the module docstring).

    ``following`` holds the ids of the tasks this process's executor follows right now:
    their stored status is theirs to write, never inferred from the execution.
    ``retention`` (seconds, ``None``: for ever) and ``clock`` (milliseconds) drive the
    deletion of tasks that ended (see the module docstring)."""

    def __init__(self, rt: Runtime, following: set[str], *, retention: float | None = DEFAULT_RETENTION,
                 clock: Callable[[], int] = now_ms) -> None:
        self.rt = rt
        self.following = following
        self.retention = retention
        self.clock = clock
        self._next_prune = 0

    async def save(self, task: Task, *, event: Any, prev: Task | None, prev_version: TaskVersion,
                   context: ServerCallContext) -> TaskVersion:
        del event, prev
        store = self.rt.store
        owner = resolve_user_scope(context)
        current = await store.get_env(_SCOPE, f"a2a_task:{task.id}", "current")
        if isinstance(current, dict) and current.get("owner") != owner:
            raise ConcurrentTaskModificationError(task.id)
        stored = _version(current.get("version")) if isinstance(current, dict) else 0
        cancelling = task.status.state == TaskState.TASK_STATE_CANCELED
        if cancelling:
            # a cancel overrides any non-terminal state, whatever version it was read at
            state = ParseDict(current["task"], Task()).status.state if isinstance(current, dict) else None
            if state is None or state in _TERMINAL:
                raise ConcurrentTaskModificationError(task.id)
        elif stored != _as_int(prev_version):
            raise ConcurrentTaskModificationError(task.id)
        version = stored + 1
        if not await store.claim_env(_SCOPE, f"a2a_task:{task.id}", f"v{version}", {"at": now_ms()}, now_ms()):
            raise ConcurrentTaskModificationError(task.id)
        await store.set_env(_SCOPE, f"a2a_task:{task.id}", "current", {"owner": owner, "version": version,
                                                         "task": MessageToDict(task)})
        ended = task.status.state in _TERMINAL
        if stored:
            await store.delete_env(_SCOPE, f"a2a_task:{task.id}", f"v{stored}")
            if ended:
                entry = await store.get_env(_SCOPE, _INDEX, task.id)
                if isinstance(entry, dict) and entry.get("ended") is None:
                    await store.set_env(_SCOPE, _INDEX, task.id, {**entry, "ended": self.clock()})
        else:
            at = self.clock()
            await store.set_env(_SCOPE, f"a2a_tasks_of:{owner}", task.id, {"contextId": task.context_id})
            await store.set_env(_SCOPE, _INDEX, task.id, {"owner": owner, "at": at, "ended": at if ended else None})
            await self._prune_when_due()
        if cancelling and task.id not in self.following:
            await self._stop_elsewhere(task)
        return TaskVersion(version)

    async def _prune_when_due(self) -> None:
        """Delete old tasks when the last pass of this process is long enough ago; a failed
        pass is logged, never the failure of the write that triggered it."""
        if self.retention is None or self.clock() < self._next_prune:
            return
        self._next_prune = self.clock() + int(min(self.retention, _PRUNE_EVERY) * 1000)
        try:
            await self.prune()
        except Exception:
            log.exception("could not delete the A2A tasks past their retention")

    async def prune(self) -> int:
        """Delete every task that ended at least ``retention`` seconds ago (its thread and
        executions stay); returns how many were deleted. A task whose execution ended without
        the task being told counts as ended when the execution did; one that never got an
        execution, when it was created."""
        if self.retention is None:
            return 0
        cutoff = self.clock() - int(self.retention * 1000)
        deleted = 0
        for task_id, entry in (await self.rt.store.list_env(_SCOPE, _INDEX)).items():
            if not isinstance(entry, dict) or task_id in self.following or _version(entry.get("at")) > cutoff:
                continue
            ended = entry.get("ended")
            if ended is None:
                ended = await self._execution_ended_at(task_id, _version(entry.get("at")))
            if ended is None or _version(ended) > cutoff:
                continue
            await self._forget(task_id, str(entry.get("owner")))
            deleted += 1
        return deleted

    async def _execution_ended_at(self, task_id: str, created: int) -> int | None:
        """When the task's execution ended (``None`` while it runs or waits for a decision)."""
        record = await self.rt.store.get_execution(task_id)
        if record is None:
            return created
        if record.status in ("running", "waiting"):
            return None
        return record.updated_at

    async def _forget(self, task_id: str, owner: str) -> None:
        store = self.rt.store
        current = await store.get_env(_SCOPE, f"a2a_task:{task_id}", "current")
        if isinstance(current, dict):
            await store.delete_env(_SCOPE, f"a2a_task:{task_id}", f"v{_version(current.get('version'))}")
            await store.delete_env(_SCOPE, f"a2a_task:{task_id}", "current")
        await store.delete_env(_SCOPE, f"a2a_tasks_of:{owner}", task_id)
        if hasattr(store, "_run"):  # its push-notification configs (subscriptions in the SQL store)
            await run_op(store, ops.delete_a2a_configs, task_id, None, None)
        await store.delete_env(_SCOPE, _INDEX, task_id)  # last: a pass cut short is taken up by the next

    async def _stop_elsewhere(self, task: Task) -> None:
        """A cancel recorded here for a task whose execution runs on another worker (or
        nowhere): end that execution."""
        await end_execution(self.rt, task.id)

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        current = await self.rt.store.get_env(_SCOPE, f"a2a_task:{task_id}", "current")
        if not isinstance(current, dict) or current.get("owner") != resolve_user_scope(context):
            return None
        task = ParseDict(current["task"], Task())
        if task.status.state not in _TERMINAL and task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED \
                and task_id not in self.following:
            task = await self._as_execution_ended(task)
        return StoredTask(task, TaskVersion(_version(current.get("version"))))

    async def _as_execution_ended(self, task: Task) -> Task:
        """The task as its execution tells (when it ended without the task being told: the
        process following it stopped); unchanged while the execution goes on."""
        record = await self.rt.store.get_execution(task.id)
        if record is None or record.status == "running" or (record.status == "waiting" and "pending" not in record.state):
            return task
        seen = Task()
        seen.CopyFrom(task)
        if record.status == "waiting":
            state, text = TaskState.TASK_STATE_INPUT_REQUIRED, "waiting for approval (reply 'yes' to approve)"
        elif record.status == "complete":
            state, text = TaskState.TASK_STATE_COMPLETED, await self._last_reply(record.thread_id)
            seen.artifacts.append(Artifact(artifact_id=new_id("art_"), name="reply", parts=[Part(text=text)]))
        elif record.status == "cancelled":
            state, text = TaskState.TASK_STATE_CANCELED, "the turn was cancelled"
        else:
            state, text = TaskState.TASK_STATE_FAILED, record.error or "the agent failed"
        seen.status.CopyFrom(TaskStatus(state=state, message=Message(
            message_id=new_id("msg_"), role=Role.ROLE_AGENT, task_id=task.id, context_id=task.context_id,
            parts=[Part(text=text)])))
        return seen

    async def _last_reply(self, thread_id: str) -> str:
        for message in reversed(await self.rt.store.list_messages(thread_id)):
            if message.role == "assistant" and message.content:
                return str(message.content)
        return ""

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        owner = resolve_user_scope(context)
        tasks: list[Task] = []
        for task_id in await self.rt.store.list_env(_SCOPE, f"a2a_tasks_of:{owner}"):
            found = await self.get(task_id, context)
            if found is None:
                continue
            task = found.task
            if params.context_id and task.context_id != params.context_id:
                continue
            if params.status and task.status.state != params.status:
                continue
            tasks.append(task)
        if params.HasField("status_timestamp_after"):
            after = params.status_timestamp_after.ToNanoseconds()
            tasks = [t for t in tasks if t.status.HasField("timestamp") and t.status.timestamp.ToNanoseconds() >= after]
        # newest first, ties by id: a stable order, so a page token (the offset) stays meaningful
        tasks.sort(key=lambda t: (t.status.timestamp.ToNanoseconds() if t.status.HasField("timestamp") else 0, t.id),
                   reverse=True)
        size = params.page_size or 50
        token = params.page_token
        if token and not token.isdigit():
            from a2a.utils.errors import InvalidParamsError

            raise InvalidParamsError(f"invalid page token: {token}")
        start = int(token or 0)
        end = start + size
        return ListTasksResponse(tasks=tasks[start:end], total_size=len(tasks), page_size=size,
                                 next_page_token=str(end) if end < len(tasks) else None)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        owner = resolve_user_scope(context)
        current = await self.rt.store.get_env(_SCOPE, f"a2a_task:{task_id}", "current")
        if not isinstance(current, dict) or current.get("owner") != owner:
            return
        await self._forget(task_id, owner)


async def end_execution(rt: Runtime, execution_id: str) -> None:
    """End a cancelled task's execution, and only it: a queued one leaves its thread's inbox
    (it never runs), a running one is stopped (through the bus when another process runs it),
    one waiting for approval is marked cancelled (a decision made meanwhile wins)."""
    await rt.cancel(execution_id)


def _encode(event: Any) -> dict[str, Any]:
    kind = next(k for k, cls in _EVENTS.items() if isinstance(event, cls))
    return {"kind": kind, "event": MessageToDict(event)}


def _decode(data: dict[str, Any]) -> Any:
    return ParseDict(data["event"], _EVENTS[data["kind"]]())


class BusTaskEventStream(TaskEventStream):
    """Task events published on our bus under the key ``a2a:<task id>`` (between workers
    through the PostgreSQL relay when there is one)."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    async def publish(self, task_id: str, event: VersionedEvent) -> None:
        self.rt.bus.emit(_EVENT_TYPE, f"a2a:{task_id}", {"version": _as_int(event.version), **_encode(event.event)})

    async def subscribe(self, task_id: str, *, after: TaskVersion) -> AsyncGenerator[VersionedEvent, None]:
        floor = _as_int(after)
        sub = self.rt.bus.subscribe(f"a2a:{task_id}", reasoning=False)
        try:
            # what was written before this subscription began: the task's status now
            current = await self.rt.store.get_env(_SCOPE, f"a2a_task:{task_id}", "current")
            if isinstance(current, dict) and _version(current.get("version")) > floor:
                task = ParseDict(current["task"], Task())
                floor = _version(current.get("version"))
                yield VersionedEvent(TaskStatusUpdateEvent(task_id=task_id, context_id=task.context_id,
                                                           status=task.status), TaskVersion(floor))
            while True:
                event = await sub.get()
                if event.type != _EVENT_TYPE or _version(event.data.get("version")) <= floor:
                    continue
                yield VersionedEvent(_decode(event.data), TaskVersion(_version(event.data["version"])))
        finally:
            sub.close()

    async def destroy(self, task_id: str) -> None:
        """Nothing to release: a bus key lives only while someone subscribes to it."""
