"""Daemon threads that run synchronous tool handlers, kept a while for the next call.

Starting a thread per call costs more than most handlers take; reusing idle threads makes a
quick synchronous tool nearly as cheap as an asynchronous one. There is no cap: a call never
waits for another (a handler stuck in ``time.sleep`` holds its own thread and the next call
gets a fresh one), and threads idle for ``IDLE_SECONDS`` exit. They are daemons, so a call
given up (a timeout, a stop) neither keeps the process from exiting nor holds a worker others
need.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

__all__ = ["IDLE_SECONDS", "TOOL_THREADS", "Job", "ToolThreads"]

#: how long a thread with nothing to do waits for another call before it exits
IDLE_SECONDS = 30.0


#: a job runs on the thread and returns what hands its result over (called once the thread
#: counts as idle, so the caller's next job finds this thread free)
Job = Callable[[], Callable[[], None]]


class ToolThreads:
    """Runs jobs on idle threads when some wait, else on a new one."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS) -> None:
        self._idle_seconds = idle_seconds
        self._jobs: queue.SimpleQueue[tuple[Job, str]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for a job, less the jobs already queued for them

    def submit(self, job: Job, name: str) -> None:
        """Run ``job()`` on a thread named ``name`` while it runs, then what it returns;
        returns at once."""
        with self._lock:
            if self._idle:
                self._idle -= 1
                self._jobs.put((job, name))
                return
        threading.Thread(target=self._work, args=(job, name), name=name, daemon=True).start()

    def _work(self, job: Job, name: str) -> None:
        me = threading.current_thread()
        while True:
            me.name = name
            hand_over = job()
            me.name = "standardagents-tool-idle"
            with self._lock:
                self._idle += 1
            hand_over()
            try:
                job, name = self._jobs.get(timeout=self._idle_seconds)
            except queue.Empty:
                with self._lock:
                    # a job queued while this thread timed out is still counted on it
                    try:
                        job, name = self._jobs.get_nowait()
                    except queue.Empty:
                        self._idle -= 1
                        return


#: the process's threads for synchronous tool handlers
TOOL_THREADS = ToolThreads()
