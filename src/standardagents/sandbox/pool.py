"""A small pool of warm sandbox processes, and ``execute``: one job from code to result.

Loading Pyodide costs seconds, so processes are started ahead and kept. Each runs one job
at a time, in a fresh interpreter of its own (see ``runner.ts``). A process that has run
code for one scope (a thread) is still reused only for that same scope, so what one
thread's code does to the process is never seen by another. A process killed on a limit
is replaced, and one that has run ``max_uses`` jobs or grown by half its memory limit since
it started is retired.

What comes back is bounded: output (the code's prints and console calls, and whatever it
writes straight to the process's stdout/stderr) to ``MAX_LOG_CHARS`` characters and
``MAX_LOG_LINES`` lines, the result to ``MAX_LOG_CHARS`` characters of JSON, the
workspace's files to ``MAX_WORKSPACE_BYTES``.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import contextlib
import json
import os
import time
import weakref
from collections import OrderedDict
from typing import Any

from .process import RawOutcome, SandboxProcess
from .types import (
    DEFAULT_MEMORY_LIMIT,
    DEFAULT_TIMEOUT,
    LANGUAGES,
    CodeExecutionError,
    CodeExecutionLog,
    CodeExecutionResult,
    CodeExecutionStatus,
)

__all__ = ["MAX_LOG_CHARS", "MAX_LOG_LINES", "MAX_WORKSPACE_BYTES", "SandboxPool", "default_pool", "execute"]

#: characters of output kept per execution, line ends included (the rest is cut with a note;
#: past this, bytes written straight to the sandbox's stdout/stderr end the run); also the
#: most characters of JSON a result may take
MAX_LOG_CHARS = 1_000_000
#: lines of output kept per execution
MAX_LOG_LINES = 10_000
#: bytes of files one execution may take in and give back
MAX_WORKSPACE_BYTES = 64 * 1024 * 1024
#: bytes of one reply from the sandbox: the files as base64, the logs and the result as JSON
MAX_REPLY_BYTES = MAX_WORKSPACE_BYTES * 4 // 3 + 16 * 1024 * 1024
_TRUNCATED = "[output truncated]"

_live: weakref.WeakSet[SandboxProcess] = weakref.WeakSet()


@atexit.register
def _kill_all() -> None:
    for proc in list(_live):
        proc.kill_now()


class SandboxPool:
    """Warm processes: ``size`` fresh ones kept ready, plus idle ones tied to a scope."""

    def __init__(self, size: int | None = None, *, max_uses: int = 100, max_idle: int = 4,
                 max_running: int | None = None) -> None:
        self.size = size if size is not None else int(os.environ.get("STANDARDAGENTS_SANDBOX_POOL", "1"))
        self.max_uses = max_uses
        self.max_idle = max_idle
        self._fresh: list[SandboxProcess] = []
        self._idle: OrderedDict[tuple[str | None, bool], list[SandboxProcess]] = OrderedDict()
        self._starting = 0
        self._refill: set[asyncio.Task[None]] = set()
        self._running = asyncio.Semaphore(max_running or max(2, os.cpu_count() or 2))
        self._closed = False

    async def _spawn(self, network: bool) -> SandboxProcess:
        proc = SandboxProcess(network=network)
        _live.add(proc)
        await proc.start()
        return proc

    def _top_up(self) -> None:
        while not self._closed and len(self._fresh) + self._starting < self.size:
            self._starting += 1
            task = asyncio.create_task(self._start_fresh())
            self._refill.add(task)
            task.add_done_callback(self._refill.discard)

    async def _start_fresh(self) -> None:
        try:
            proc = await self._spawn(False)
        except Exception:
            return
        finally:
            self._starting -= 1
        if self._closed:
            await proc.kill()
        else:
            self._fresh.append(proc)

    def prewarm(self) -> None:
        """Start the fresh processes in the background (a server does it at start-up)."""
        self._top_up()

    async def warm(self) -> None:
        """Start the fresh processes now and wait until they are ready."""
        while not self._closed and len(self._fresh) < self.size:
            self._fresh.append(await self._spawn(False))

    async def acquire(self, scope: str | None, network: bool) -> SandboxProcess:
        """A process for ``scope``: its own idle one, else a fresh one, else a new one."""
        idle = self._idle.get((scope, network))
        while idle:
            proc = idle.pop()
            if proc.alive:
                return proc
        if not network:
            while self._fresh:
                proc = self._fresh.pop(0)
                self._top_up()
                if proc.alive:
                    proc.scope = scope
                    return proc
        proc = await self._spawn(network)
        proc.scope = scope
        self._top_up()
        return proc

    async def release(self, proc: SandboxProcess, memory_limit: int) -> None:
        """Keep a healthy process for its scope, or retire it (after ``max_uses`` jobs, or once it
        grew by half the memory limit since it was ready)."""
        if (self._closed or not proc.alive or proc.uses >= self.max_uses
                or proc.rss() - proc.ready_rss > memory_limit // 2):
            await proc.kill()
            return
        key = (proc.scope, proc.network)
        self._idle.setdefault(key, []).append(proc)
        self._idle.move_to_end(key)
        while sum(len(v) for v in self._idle.values()) > self.max_idle:
            _, oldest = next(iter(self._idle.items()))
            victim = oldest.pop(0)
            if not oldest:
                self._idle.popitem(last=False)
            await victim.kill()

    async def run(self, code: str, *, language: str = "python", timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109 (a limit the sandbox enforces)
                  memory_limit: int = DEFAULT_MEMORY_LIMIT, network: bool = False,
                  files: dict[str, bytes] | None = None, scope: str | None = None
                  ) -> tuple[CodeExecutionResult, dict[str, bytes]]:
        """Run ``code`` with ``files`` (workspace path -> bytes) in its workspace; returns the
        result and the workspace's files at the end."""
        if language not in LANGUAGES:
            raise ValueError(f"unknown language {language!r}: use one of {', '.join(LANGUAGES)}")
        if not (timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds (got {timeout!r})")
        if memory_limit < 64 * 1024 * 1024:
            raise ValueError(f"memory_limit must be at least 64 MiB (got {memory_limit} bytes)")
        given = dict(files or {})
        job = {"language": language, "code": code, "network": network, "maxLogChars": MAX_LOG_CHARS,
               "maxLogLines": MAX_LOG_LINES, "maxFileBytes": MAX_WORKSPACE_BYTES,
               "maxReplyBytes": MAX_REPLY_BYTES,
               "files": {k: base64.b64encode(v).decode() for k, v in given.items()}}
        async with self._running:
            proc = await self.acquire(scope, network)
            started = time.perf_counter()
            try:
                raw = await proc.execute(job, timeout=timeout, memory_limit=memory_limit,
                                         output_limit=MAX_LOG_CHARS, line_limit=MAX_LOG_LINES,
                                         reply_limit=MAX_REPLY_BYTES + 1024)
            finally:
                await self.release(proc, memory_limit)
        return _result(raw, time.perf_counter() - started, given)

    async def close(self) -> None:
        self._closed = True
        for task in list(self._refill):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        procs = [*self._fresh, *(p for group in self._idle.values() for p in group)]
        self._fresh, self._idle = [], OrderedDict()
        for proc in procs:
            await proc.kill()


def _bounded(logs: list[CodeExecutionLog]) -> list[CodeExecutionLog]:
    """The logs in time order, cut to ``MAX_LOG_CHARS`` characters and ``MAX_LOG_LINES`` lines
    (the sandbox's own logs and the stray output are each within them, not together)."""
    logs.sort(key=lambda entry: entry.time)
    chars = 0
    for index, entry in enumerate(logs):
        chars += len(entry.message) + 1
        if chars > MAX_LOG_CHARS or index >= MAX_LOG_LINES:
            return [*logs[:min(index, MAX_LOG_LINES - 1)], CodeExecutionLog("stderr", _TRUNCATED, entry.time)]
    return logs


def _result(raw: RawOutcome, seconds: float, given: dict[str, bytes]) -> tuple[CodeExecutionResult, dict[str, bytes]]:
    payload = raw.payload
    logs = list(raw.stray)
    logs += [CodeExecutionLog(stream="stderr" if item.get("stream") == "stderr" else "stdout",
                              message=str(item.get("message", "")), time=int(item.get("time", 0)))
             for item in payload.get("logs", []) if isinstance(item, dict)]
    logs = _bounded(logs)
    if raw.status != "done":
        status: CodeExecutionStatus = "timeout" if raw.status == "timeout" else "killed"
        error = CodeExecutionError(name=raw.error or "SandboxKilled", message=raw.reason)
        return CodeExecutionResult(status=status, logs=logs, error=error, duration_ms=seconds * 1000), given
    try:
        files = {k: base64.b64decode(v) for k, v in (payload.get("files") or {}).items()}
        value = json.loads(payload["resultJson"]) if payload.get("ok") else None
    except (ValueError, TypeError, KeyError, AttributeError):
        error = CodeExecutionError(name="SandboxKilled", message="the sandbox's reply could not be read")
        return CodeExecutionResult(status="killed", logs=logs, error=error, duration_ms=seconds * 1000), given
    if payload.get("filesOverLimit"):
        files = given
        logs.append(CodeExecutionLog("stderr", "files were not written back: they pass the size cap"))
    if payload.get("ok"):
        return CodeExecutionResult(status="completed", result=value, logs=logs,
                                   duration_ms=seconds * 1000), files
    error = CodeExecutionError(name=str(payload.get("name") or "Error"), message=str(payload.get("message") or ""),
                               stack=str(payload.get("stack") or ""))
    return CodeExecutionResult(status="error", logs=logs, error=error, duration_ms=seconds * 1000), files


_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SandboxPool] = weakref.WeakKeyDictionary()


def default_pool() -> SandboxPool:
    """The running event loop's pool (created on first use)."""
    loop = asyncio.get_running_loop()
    pool = _pools.get(loop)
    if pool is None:
        pool = _pools[loop] = SandboxPool()
    return pool


async def execute(code: str, **options: Any) -> CodeExecutionResult:
    """Run code in the default pool without a thread (no files written back)."""
    result, _ = await default_pool().run(code, **options)
    return result
