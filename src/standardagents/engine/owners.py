"""Who runs an execution: owner ids (``host:pid:start-nonce``) and whether their process is gone.

Below both crash recovery and resuming, which judge claims and executions by it. On Linux the
id carries the process's start time (``/proc``), so a process of this host is told apart from
a later one that got the same pid: a process that still runs keeps its turns however late its
heartbeat (an overloaded worker must not see them run a second time elsewhere), and one that
is gone gives them up at once."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["LIVE_OWNERS", "RELEASED", "gone", "new_owner", "still_running"]

#: prefix of the owner a process shutting down leaves on what it lets go (engine/handover.py)
RELEASED = "released:"

#: the owner ids of the runtimes open in this process (an owner id naming this host and this
#: pid but missing here belonged to an earlier process that had the same pid)
LIVE_OWNERS: set[str] = set()


_PROC = os.path.isdir("/proc/self")


def _start_time(pid: int) -> str | None:
    """When the process ``pid`` of this host started (clock ticks since boot), or None when it
    does not run (a zombie, reaped or not, counts as not running) or there is no ``/proc``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


def new_owner(host: str) -> str:
    """A new owner id for a runtime of this process."""
    return f"{host}:{os.getpid()}:{_start_time(os.getpid()) or 0}-{secrets.token_hex(6)}"


def still_running(owner: str, host: str) -> bool:
    """Whether ``owner`` is a process of this host that certainly still runs: its pid runs and
    started when the owner id says (ids without a start time, or of other hosts: False)."""
    owner_host, pid = _parse_owner(owner)
    started = owner.rpartition(":")[2].partition("-")[0]
    if owner_host != host or pid is None or not started.isdigit() or started == "0":
        return False
    return _start_time(pid) == started


def _parse_owner(owner: str) -> tuple[str, int | None]:
    """``(host, pid)`` of an owner id (``host:pid:nonce``, or ``host:pid`` from older versions)."""
    head, _, last = owner.rpartition(":")
    if last.isdigit():
        return head, int(last)
    host, _, pid = head.rpartition(":")
    return host, int(pid) if pid.isdigit() else None


def gone(rt: Runtime, owner: str, host: str, *, fresh: bool) -> bool:
    """Whether the runtime named ``owner`` is gone. ``fresh``: its heartbeat is recent.

    A live pid is only a hint (pids are reused, and a restarted container's process often
    has its predecessor's pid): on this host, an owner naming this very process is alive
    only while it is one of the runtimes open here; another live pid is trusted until its
    heartbeat goes stale. Other hosts are judged by the heartbeat alone."""
    if owner == rt.owner or owner in LIVE_OWNERS:
        return False
    if owner.startswith(RELEASED):  # let go by a process shutting down
        return True
    owner_host, pid = _parse_owner(owner)
    if owner_host == host and pid is not None:
        if pid == os.getpid() or not _alive(pid):
            return True
        if still_running(owner, host):
            return False
        if _PROC and _start_time(pid) is None:  # a zombie: killed, not yet reaped
            return True
    return not fresh


def _alive(pid: int) -> bool:
    """Whether a process of this host with this pid runs (not necessarily the same one)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
