"""Several worker processes behind one listening socket, supervised.

uvicorn's supervisor pings every worker from its first half-second and kills one that has not
answered within five seconds, logging only "Child process [N] died". A worker is a fresh
interpreter (spawn) that must import the server before it can answer, which takes longer than
that on a busy machine: healthy workers were killed and replaced at start-up. Here a starting
worker is given time to come up (it is only asked, never waited for), a serving worker is held
to the health check, and every replacement says why: the exit code, the signal, or the check
it failed.
"""

from __future__ import annotations

import logging
import signal
import time
from socket import socket

from uvicorn.config import STARTUP_FAILURE, Config
from uvicorn.supervisors.multiprocess import Multiprocess, Process

__all__ = ["STARTUP_GRACE_SECONDS", "WorkerSupervisor", "exit_reason"]

log = logging.getLogger("uvicorn.error")

#: how long a new worker may take to import and answer its first health check
STARTUP_GRACE_SECONDS = 120.0


def exit_reason(code: int | None) -> str:
    """Why a worker process ended, from its exit code, in words."""
    if code is None:
        return "is still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (often the system running out of memory)" if -code == signal.SIGKILL else ""
        return f"was killed by {name}{hint}"
    if code == STARTUP_FAILURE:
        return "failed to start (its error is logged above)"
    return f"exited with code {code}" + (" (its error is logged above)" if code else "")


class WorkerSupervisor(Multiprocess):
    """uvicorn's multi-process supervisor with a start-up grace period and reasons."""

    def __init__(self, config: Config, sockets: list[socket], *, startup_grace: float = STARTUP_GRACE_SECONDS) -> None:
        super().__init__(config, sockets)
        self.startup_grace = startup_grace
        self._born: dict[int, float] = {}
        self._asked: set[int] = set()
        self._serving: set[int] = set()

    def _came_up(self, process: Process) -> bool:
        """Whether a starting worker has answered a health check, without waiting for it."""
        try:
            if id(process) not in self._asked:
                process.parent_conn.send(b"ping")
                self._asked.add(id(process))
            if process.parent_conn.poll(0):
                process.parent_conn.recv()
                self._asked.discard(id(process))
                return True
        except (OSError, EOFError):
            pass
        return False

    def _problem(self, process: Process) -> str | None:
        """Why ``process`` must be replaced, or None when it is well (or still starting)."""
        key = id(process)
        if not process.process.is_alive():
            return exit_reason(process.exitcode)
        if key not in self._serving:
            if self._came_up(process):
                self._serving.add(key)
                return None
            born = self._born.setdefault(key, time.monotonic())
            if time.monotonic() - born < self.startup_grace:
                return None
            return f"did not come up within {self.startup_grace:.0f}s"
        timeout = self.config.timeout_worker_healthcheck
        if process.ping(timeout):
            return None
        process.process.join(1)  # a worker that just died closes the pipe: report its exit
        if not process.process.is_alive():
            return exit_reason(process.exitcode)
        return f"stopped answering (no health-check reply within {timeout}s: blocked or hung)"

    def keep_subprocess_alive(self) -> None:
        if self.should_exit.is_set():
            return
        for idx, process in enumerate(self.processes):
            problem = self._problem(process)
            if problem is None:
                continue
            process.kill()
            process.join()
            if self.should_exit.is_set():
                return
            if process.exitcode == STARTUP_FAILURE and id(process) not in self._serving:
                log.error("Worker process [%s] %s; stopping.", process.pid, exit_reason(STARTUP_FAILURE))
                self.should_exit.set()
                return
            log.error("Worker process [%s] %s; starting a new one.", process.pid, problem)
            self._serving.discard(id(process))
            self._asked.discard(id(process))
            self._born.pop(id(process), None)
            replacement = Process(self.config, self.sockets)
            replacement.start()
            self.processes[idx] = replacement


#: the app factory the server hands to uvicorn, which workers run warmed up instead
_PLAIN_FACTORY = "standardagents.server.app:factory_from_env"


def run_workers(config: Config) -> None:
    """Serve ``config`` (its ``workers`` processes) until interrupted. Each worker loads the
    project and imports what a first turn needs before it accepts a connection
    (:mod:`.warmup`), so no worker's first request waits on its start-up."""
    from .warmup import WARMED_FACTORY

    if config.factory and config.app == _PLAIN_FACTORY:
        config.app = WARMED_FACTORY
    sock = config.bind_socket()
    try:
        WorkerSupervisor(config, [sock]).run()
    finally:
        sock.close()
