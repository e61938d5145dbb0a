"""One sandbox process: Deno running ``runner.ts``, watched from outside.

The process gets no run permission, no write permission, read access only to the Pyodide
package and this package's scripts, network access only when started for it, a clean
environment, and its own process group. The host enforces the limits: a job that outlives
its wall time, or a process whose resident memory (polled from ``/proc``) passes the
limit, ends with the whole group killed. Module downloads are refused at run time
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
            "PATH": "/usr/bin:/bin", "HOME": str(cache_dir())}


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
    """A job's end as the host saw it, before it becomes a ``CodeExecutionResult``."""

    status: str
    payload: dict[str, Any] = field(default_factory=dict)
    stray: list[str] = field(default_factory=list)
    reason: str = ""
    peak_rss: int = 0


class SandboxProcess:
    """A Deno process that runs jobs one at a time; ``alive`` until killed or exited."""

    def __init__(self, *, network: bool = False) -> None:
        self.network = network
        self.scope: str | None = None
        self.uses = 0
        self.started_at = 0.0
        self.ready_seconds = 0.0
        self._proc: asyncio.subprocess.Process | None = None
        self._token = secrets.token_hex(16)
        self._replies: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._stray: list[str] = []
        self._stderr_tail: list[str] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.alive = False

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
            preexec_fn=_die_with_parent, limit=64 * 1024 * 1024)
        self.alive = True
        self._tasks = [asyncio.create_task(self._read_stdout()), asyncio.create_task(self._read_stderr())]
        await self._send({"token": self._token, "warm": warm})
        try:
            reply = await asyncio.wait_for(self._replies.get(), START_TIMEOUT)
        except TimeoutError:
            reply = None
        if reply is None or not reply.get("ready"):
            tail = " ".join(self._stderr_tail[-3:]) or "no output"
            await self.kill()
            raise SandboxUnavailable(f"the sandbox process did not start: {tail}")
        self.ready_seconds = time.perf_counter() - self.started_at

    async def _send(self, message: dict[str, Any]) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(message).encode() + b"\n")
        await self._proc.stdin.drain()

    async def _read_stdout(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        prefix = f"SA1 {self._token} ".encode()
        stream = self._proc.stdout
        try:
            while True:
                try:
                    line = await stream.readline()
                except ValueError:  # one line past the stream limit: drop it, keep reading
                    self._stray.append("[an over-long output line was dropped]")
                    continue
                if not line:
                    break
                if line.startswith(prefix):
                    self._replies.put_nowait(json.loads(line[len(prefix):]))
                elif len(self._stray) < 10_000:
                    self._stray.append(line.decode("utf-8", "replace").rstrip("\n"))
        finally:
            self.alive = False
            self._replies.put_nowait(None)

    async def _read_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        while True:
            line = await self._proc.stderr.readline()
            if not line:
                return
            self._stderr_tail = [*self._stderr_tail[-19:], line.decode("utf-8", "replace").strip()]

    async def _watch_memory(self, limit: int) -> int:
        """Return the RSS seen once it passes ``limit`` (never returns otherwise)."""
        assert self._proc is not None
        while True:
            rss = _rss_bytes(self._proc.pid)
            if rss > limit:
                return rss
            await asyncio.sleep(POLL_SECONDS)

    async def execute(self, job: dict[str, Any], *, timeout: float, memory_limit: int) -> RawOutcome:  # noqa: ASYNC109 (a limit the sandbox enforces)
        """Run one job; the process is killed on timeout or when memory passes the limit."""
        if not self.alive:
            return RawOutcome("killed", reason="the sandbox process had exited")
        self.uses += 1
        self._stray = []
        while not self._replies.empty():
            self._replies.get_nowait()
        job = {**job, "id": secrets.token_hex(8)}
        reply_task = asyncio.ensure_future(self._replies.get())
        memory_task = asyncio.ensure_future(self._watch_memory(memory_limit))
        try:
            await self._send(job)
            done, _ = await asyncio.wait({reply_task, memory_task}, timeout=timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
        except (BrokenPipeError, ConnectionResetError):
            done = set()
            reply_task.cancel()
        finally:
            memory_task.cancel()
            if not reply_task.done():
                reply_task.cancel()
        stray = list(self._stray)
        if reply_task in done and reply_task.result() is not None:
            payload = reply_task.result()
            assert payload is not None
            return RawOutcome("done", payload, stray)
        if memory_task in done:
            await self.kill()
            return RawOutcome("killed", stray=stray, peak_rss=memory_task.result(),
                              reason=f"memory passed the limit of {memory_limit // (1024 * 1024)} MiB")
        if reply_task in done or not self.alive:
            await self.kill()
            tail = " ".join(self._stderr_tail[-2:])
            return RawOutcome("killed", stray=stray,
                              reason="the sandbox process ended" + (f": {tail}" if tail else ""))
        await self.kill()
        return RawOutcome("timeout", stray=stray, reason=f"the code ran past its time limit of {timeout:g}s")

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
