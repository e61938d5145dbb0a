"""One sandbox process: Deno running ``runner.ts``, watched from outside.

The process gets no run permission, no write permission, read access only to the Pyodide
package and this package's scripts, network access only when started for it, a clean
environment, and its own process group. The host enforces the limits: a job that outlives
its wall time, a process whose resident memory (polled from ``/proc``, plus what the host
holds of its output) passes the limit, or one that writes more output than the job's cap
ends with the whole group killed. Its pipes are read in bounded chunks: every byte the code
writes outside a reply counts against the cap, and a reply against its own size limit, so
the host never holds more for a job than those two. Module downloads are refused at run time
(``--cached-only``): the Pyodide package is fetched once into the sandbox cache by
:func:`warm_cache` (``python -m standardagents.sandbox warm``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..exceptions import StandardAgentsError
from .types import CodeExecutionLog

__all__ = [
    "INSTALL_HINT",
    "PYODIDE_VERSION",
    "RawOutcome",
    "SandboxProcess",
    "SandboxUnavailable",
    "cache_dir",
    "deno_binary",
    "pyodide_dir",
    "warm_cache",
]

log = logging.getLogger("standardagents.sandbox")

PYODIDE_VERSION = "0.29.3"
INSTALL_HINT = "pip install 'standardagents[sandbox]'"
HERE = Path(__file__).resolve().parent
RUNNER = HERE / "runner.ts"
#: seconds a new process may take to load Pyodide before it counts as broken
START_TIMEOUT = 180.0
#: how often resident memory is polled during a job
POLL_SECONDS = 0.02
#: V8 heap cap of every isolate in a sandbox process (MiB)
V8_HEAP_MB = 1024
#: bytes read from the sandbox's pipes at a time (also what a pipe's reader buffers at most)
CHUNK_BYTES = 64 * 1024
#: bytes of the process's last stderr kept to explain why it ended
STDERR_TAIL_BYTES = 2048


class SandboxUnavailable(StandardAgentsError):
    """The sandbox cannot run here (no Deno, or its Pyodide cache can't be filled)."""


def deno_binary() -> str:
    """The Deno executable: ``$STANDARDAGENTS_DENO``, the ``deno`` distribution's binary, or
    one on ``PATH``; :class:`SandboxUnavailable` naming the install command otherwise."""
    explicit = os.environ.get("STANDARDAGENTS_DENO")
    if explicit:
        return explicit
    try:
        import deno  # the PyPI distribution that ships the binary

        found = deno.find_deno_bin()
        if found and os.path.exists(found):
            return str(found)
    except (ImportError, FileNotFoundError, AttributeError):
        pass
    on_path = shutil.which("deno")
    if on_path:
        return on_path
    raise SandboxUnavailable(f"run_code needs Deno, which the sandbox extra installs: {INSTALL_HINT}")


def cache_dir() -> Path:
    """Where Deno keeps the sandbox's modules (``$STANDARDAGENTS_SANDBOX_CACHE``)."""
    explicit = os.environ.get("STANDARDAGENTS_SANDBOX_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "standardagents" / "deno"


def pyodide_dir() -> Path:
    return cache_dir() / "npm" / "registry.npmjs.org" / "pyodide" / PYODIDE_VERSION


def _env() -> dict[str, str]:
    # the machine's CA store as well as Deno's own, so TLS through a proxy with its own CA works
    return {"DENO_DIR": str(cache_dir()), "NO_COLOR": "1", "DENO_NO_UPDATE_CHECK": "1",
            "DENO_TLS_CA_STORE": os.environ.get("DENO_TLS_CA_STORE", "system,mozilla"),
            "PATH": "/usr/bin:/bin", "HOME": str(cache_dir()),
            # each job's worker is a thread of its own: without a cap, glibc keeps an arena of
            # freed memory per thread and the process's resident memory creeps up job by job
            "MALLOC_ARENA_MAX": "2"}


def warm_cache(binary: str | None = None) -> Path:
    """Fetch the runner's modules (Pyodide from the npm registry) into the sandbox cache,
    once; later runs read them offline. Returns the Pyodide directory."""
    target = pyodide_dir()
    if (target / "pyodide.asm.wasm").exists():
        return target
    deno = binary or deno_binary()
    cache_dir().mkdir(parents=True, exist_ok=True)
    # the host's own environment (proxy and CA settings) for this one trusted download
    env = {**os.environ, **_env(), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "HOME": os.environ.get("HOME", str(cache_dir()))}
    proc = subprocess.run([deno, "cache", "--quiet", str(RUNNER), str(HERE / "script_worker.ts")],
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0 or not (target / "pyodide.asm.wasm").exists():
        detail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise SandboxUnavailable(f"could not fetch Pyodide {PYODIDE_VERSION} into {cache_dir()}: {detail[0]}")
    return target


def _die_with_parent() -> None:
    """In the child before exec: be killed when the host dies, even by SIGKILL (Linux), so
    no sandbox outlives its watchdog."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


@dataclass
class RawOutcome:
    """A job's end as the host saw it, before it becomes a ``CodeExecutionResult``: ``stray``
    is what the code wrote straight to the process's stdout/stderr, ``error`` the name of
    the limit that ended it."""

    status: str
    payload: dict[str, Any] = field(default_factory=dict)
    stray: list[CodeExecutionLog] = field(default_factory=list)
    reason: str = ""
    peak_rss: int = 0
    error: str = ""


class SandboxProcess:
    """A Deno process that runs jobs one at a time; ``alive`` until killed or exited."""

    def __init__(self, *, network: bool = False) -> None:
        self.network = network
        self.scope: str | None = None
        self.uses = 0
        self.started_at = 0.0
        self.ready_seconds = 0.0
        #: resident memory once ready, before any job: what the process grows from
        self.ready_rss = 0
        self._proc: asyncio.subprocess.Process | None = None
        self._token = secrets.token_hex(16)
        self._replies: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._stderr_tail = b""
        self._tasks: list[asyncio.Task[None]] = []
        self.alive = False
        # the running job's output as the host holds it (set again by each job)
        self._output_limit = 1_000_000
        self._line_limit = 10_000
        self._reply_limit = 1024 * 1024
        self._stray: list[CodeExecutionLog] = []
        self._stray_bytes = 0
        self._partial = {"stdout": bytearray(), "stderr": bytearray()}
        self._reply_bytes = 0
        self._ended: tuple[str, str] | None = None
        self._ended_event = asyncio.Event()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    async def start(self, *, warm: bool = True) -> None:
        """Spawn the process and wait until Pyodide is loaded (``warm``) and it is ready."""
        deno = deno_binary()
        await asyncio.to_thread(warm_cache, deno)
        reads = ",".join([str(pyodide_dir().parent.parent), str(HERE)])
        args = [deno, "run", "--quiet", "--no-prompt", "--cached-only", "--no-config", "--no-lock",
                "--unstable-worker-options", f"--allow-read={reads}",
                f"--v8-flags=--max-old-space-size={V8_HEAP_MB}"]
        if self.network:
            args.append("--allow-net")
        args.append(str(RUNNER))
        self.started_at = time.perf_counter()
        self._proc = await asyncio.create_subprocess_exec(
            *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=_env(), cwd=str(HERE), start_new_session=True,
            preexec_fn=_die_with_parent, limit=CHUNK_BYTES)
        self.alive = True
        self._tasks = [asyncio.create_task(self._read_stdout()), asyncio.create_task(self._read_stderr())]
        await self._send({"token": self._token, "warm": warm, "network": self.network,
                          "pyodide": str(pyodide_dir())})
        try:
            reply = await asyncio.wait_for(self._replies.get(), START_TIMEOUT)
        except TimeoutError:
            reply = None
        if reply is None or not reply.get("ready"):
            tail = self._tail(3) or "no output"
            await self.kill()
            raise SandboxUnavailable(f"the sandbox process did not start: {tail}")
        self.ready_seconds = time.perf_counter() - self.started_at
        self.ready_rss = _rss_bytes(self._proc.pid)

    async def _send(self, message: dict[str, Any]) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(message).encode() + b"\n")
        await self._proc.stdin.drain()

    async def _read_stdout(self) -> None:
        """Split stdout into replies (``SA1 <token> <json>`` up to a newline, wherever it
        starts) and stray bytes, reading at most ``CHUNK_BYTES`` at a time."""
        assert self._proc is not None and self._proc.stdout is not None
        prefix = f"SA1 {self._token} ".encode()
        stream = self._proc.stdout
        pending = bytearray()  # a reply being read, or a tail that may start the prefix
        in_reply = False
        try:
            while True:
                data = await stream.read(CHUNK_BYTES)
                if not data:
                    break
                if self._ended is not None:
                    continue  # killed: drain to the end, keep nothing
                scanned = len(pending) if in_reply else 0
                pending += data
                while pending:
                    if in_reply:
                        end = pending.find(b"\n", scanned)
                        if end < 0:
                            self._reply_bytes = len(pending)
                            if len(pending) > self._reply_limit:
                                pending.clear()
                                self._end("OutputLimitExceeded", "output limit exceeded: the sandbox's "
                                          f"reply passed {self._reply_limit:,} bytes")
                            break
                        body = bytes(pending[:end])
                        del pending[:end + 1]
                        in_reply, scanned, self._reply_bytes = False, 0, 0
                        self._deliver(body)
                        continue
                    at = pending.find(prefix)
                    if at >= 0:
                        self._take_stray("stdout", pending[:at])
                        del pending[:at + len(prefix)]
                        in_reply = True
                        continue
                    cut = len(pending) - (len(prefix) - 1)
                    if cut > 0:
                        self._take_stray("stdout", pending[:cut])
                        del pending[:cut]
                    break
        finally:
            self.alive = False
            self._replies.put_nowait(None)

    def _deliver(self, body: bytes) -> None:
        try:
            reply = json.loads(body)
        except ValueError:
            self._end("SandboxKilled", "the sandbox's reply could not be read")
            return
        if isinstance(reply, dict):
            self._replies.put_nowait(reply)

    async def _read_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        while True:
            data = await self._proc.stderr.read(CHUNK_BYTES)
            if not data:
                return
            self._stderr_tail = (self._stderr_tail + data)[-STDERR_TAIL_BYTES:]
            self._take_stray("stderr", data)

    def _tail(self, lines: int) -> str:
        text = self._stderr_tail.decode("utf-8", "replace").strip().splitlines()[-lines:]
        return " ".join(line.strip() for line in text)

    def _take_stray(self, stream: str, data: bytes | bytearray) -> None:
        """Count bytes the code wrote outside a reply against the job's output cap; keep them
        as lines until the line cap; past the output cap, end the job."""
        if not data or self._ended is not None:
            return
        self._stray_bytes += len(data)
        if self._stray_bytes > self._output_limit:
            self._end("OutputLimitExceeded", f"output limit exceeded: the code wrote more than "
                      f"{self._output_limit:,} characters straight to the sandbox's stdout/stderr, "
                      "so the sandbox was stopped")
            return
        partial = self._partial[stream]
        partial += data
        while (end := partial.find(b"\n")) >= 0:
            self._keep_line(stream, partial[:end])
            del partial[:end + 1]

    def _keep_line(self, stream: str, raw: bytes | bytearray) -> None:
        if len(self._stray) < self._line_limit:
            self._stray.append(CodeExecutionLog("stderr" if stream == "stderr" else "stdout",
                                                raw.decode("utf-8", "replace"), int(time.time() * 1000)))

    def _flush_stray(self) -> list[CodeExecutionLog]:
        for stream, partial in self._partial.items():
            if partial:
                self._keep_line(stream, partial)
                partial.clear()
        return list(self._stray)

    def _held(self) -> int:
        """Bytes the host holds of the running job's output."""
        return self._reply_bytes + self._stray_bytes

    def _end(self, error: str, reason: str) -> None:
        """Stop the process now (from a pipe reader): the running job ends with ``error``."""
        if self._ended is None:
            self._ended = (error, reason)
            self._ended_event.set()
        self.kill_now()
        self.alive = False

    async def _watch_memory(self, limit: int) -> int:
        """Return the RSS seen once it passes ``limit`` (never returns otherwise)."""
        assert self._proc is not None
        while True:
            rss = _rss_bytes(self._proc.pid) + self._held()
            if rss > limit:
                return rss
            await asyncio.sleep(POLL_SECONDS)

    async def execute(self, job: dict[str, Any], *, timeout: float, memory_limit: int,  # noqa: ASYNC109 (a limit the sandbox enforces)
                      output_limit: int, line_limit: int, reply_limit: int) -> RawOutcome:
        """Run one job; the process is killed on timeout, when memory passes the limit, when
        the code writes more than ``output_limit`` bytes outside a reply, or when the reply
        passes ``reply_limit`` bytes."""
        if not self.alive:
            return RawOutcome("killed", reason="the sandbox process had exited")
        self.uses += 1
        self._output_limit, self._line_limit, self._reply_limit = output_limit, line_limit, reply_limit
        self._stray, self._stray_bytes = [], 0
        for partial in self._partial.values():
            partial.clear()
        while not self._replies.empty():
            self._replies.get_nowait()
        job = {**job, "id": secrets.token_hex(8)}
        reply_task = asyncio.ensure_future(self._replies.get())
        memory_task = asyncio.ensure_future(self._watch_memory(memory_limit))
        ended_task = asyncio.ensure_future(self._ended_event.wait())
        loop = asyncio.get_running_loop()
        # until the runner says the code started (its interpreter may still be loading), the
        # start-up limit applies; the job's wall time runs from there
        deadline, started = loop.time() + START_TIMEOUT, False
        try:
            await self._send(job)
            while True:
                done, _ = await asyncio.wait({reply_task, memory_task, ended_task},
                                             timeout=max(0.0, deadline - loop.time()),
                                             return_when=asyncio.FIRST_COMPLETED)
                reply = reply_task.result() if reply_task in done else None
                if started or reply is None or not reply.get("started"):
                    break
                deadline, started = loop.time() + timeout, True
                reply_task = asyncio.ensure_future(self._replies.get())
        except (BrokenPipeError, ConnectionResetError):
            done = set()
            reply_task.cancel()
        finally:
            memory_task.cancel()
            ended_task.cancel()
            if not reply_task.done():
                reply_task.cancel()
        stray = self._flush_stray()
        self._stray = []
        if self._ended is not None:
            await self.kill()
            error, reason = self._ended
            return RawOutcome("killed", stray=stray, reason=reason, error=error)
        if reply_task in done and reply_task.result() is not None:
            payload = reply_task.result()
            assert payload is not None
            return RawOutcome("done", payload, stray)
        if memory_task in done:
            await self.kill()
            return RawOutcome("killed", stray=stray, peak_rss=memory_task.result(), error="MemoryLimitExceeded",
                              reason=f"memory passed the limit of {memory_limit // (1024 * 1024)} MiB")
        if reply_task in done or not self.alive:
            await self.kill()
            tail = self._tail(2)
            return RawOutcome("killed", stray=stray, error="SandboxKilled",
                              reason="the sandbox process ended" + (f": {tail}" if tail else ""))
        await self.kill()
        if not started:
            return RawOutcome("killed", stray=stray, error="SandboxKilled",
                              reason=f"the sandbox did not start the code within {START_TIMEOUT:g}s")
        return RawOutcome("timeout", stray=stray, error="TimeoutError",
                          reason=f"the code ran past its time limit of {timeout:g}s")

    def rss(self) -> int:
        return _rss_bytes(self._proc.pid) if self._proc is not None else 0

    async def kill(self) -> None:
        """End the whole process group and reap it."""
        self.alive = False
        proc = self._proc
        if proc is None:
            return
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.wait(), 10)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        self._tasks = []

    def kill_now(self) -> None:
        """Synchronous kill for interpreter exit."""
        proc = self._proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
