"""``ThreadState.run_code``: the thread's files go into the sandbox and come back changed.

The host reads the chosen files from the store, hands them to the sandbox as its
workspace, and after a run that completed or raised writes back each file that is new or
changed and deletes each one the code removed. A run that timed out or was killed changes
nothing. Sizes are capped both ways so one run can't flood the store or the host.
"""

from __future__ import annotations

import mimetypes
from typing import TYPE_CHECKING, Any

from .pool import MAX_WORKSPACE_BYTES, SandboxPool
from .types import CodeExecutionLog, CodeExecutionResult

if TYPE_CHECKING:
    from ..engine.state import ThreadState

__all__ = ["MAX_WORKSPACE_BYTES", "prewarm_sandbox", "run_thread_code", "sandbox_pool_for"]


def sandbox_pool_for(runtime: Any) -> SandboxPool:
    """The runtime's pool, made on first use (closed with the runtime)."""
    pool = getattr(runtime, "sandbox_pool", None)
    if pool is None:
        pool = SandboxPool()
        runtime.sandbox_pool = pool
    return pool


def prewarm_sandbox(runtime: Any) -> bool:
    """Start warming the runtime's sandbox when its project has a ``run_code`` tool, so the
    first call doesn't pay the cold start. True when it started."""
    from .tool import RUN_CODE_TOOL

    if not runtime.registry.has("tools", RUN_CODE_TOOL):
        return False
    sandbox_pool_for(runtime).prewarm()
    return True


def _workspace_name(path: str) -> str | None:
    parts = [p for p in path.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        return None
    return "/".join(parts)


async def run_thread_code(state: ThreadState, code: str, *, language: str, timeout: float, memory_limit: int,  # noqa: ASYNC109 (a limit the sandbox enforces)
                          network: bool, files: list[str] | None) -> CodeExecutionResult:
    store = state.runtime.store
    tid = state.thread_id
    if files is None:
        records = await store.list_files(tid)
    else:
        seen: dict[str, Any] = {}
        for pattern in files:
            for stats in (await store.find_files(tid, pattern, limit=10_000)).files:
                seen.setdefault(stats.path, stats)
        records = list(seen.values())
    if sum(r.size for r in records) > MAX_WORKSPACE_BYTES:
        raise ValueError(f"the selected thread files pass {MAX_WORKSPACE_BYTES // (1024 * 1024)} MiB: "
                         "choose fewer with files=[...]")
    stored: dict[str, str] = {}
    given: dict[str, bytes] = {}
    for record in records:
        name = _workspace_name(record.path)
        if name is None or name in stored:
            continue
        data = await store.read_file(tid, record.path)
        if data is not None:
            stored[name], given[name] = record.path, data
    pool = sandbox_pool_for(state.runtime)
    result, out = await pool.run(code, language=language, timeout=timeout, memory_limit=memory_limit,
                                 network=network, files=given, scope=tid)
    if result.status not in ("completed", "error"):
        return result
    if sum(len(v) for v in out.values()) > MAX_WORKSPACE_BYTES:
        result.logs.append(CodeExecutionLog("stderr", "files were not written back: they pass the size cap"))
        return result
    for name, data in sorted(out.items()):
        if given.get(name) != data:
            path = stored.get(name, "/" + name)
            await store.write_file(tid, path, data, mime_type=mimetypes.guess_type(path)[0])
            result.files_written.append(path)
    for name in sorted(set(given) - set(out)):
        await store.delete_file(tid, stored[name])
        result.files_deleted.append(stored[name])
    return result
