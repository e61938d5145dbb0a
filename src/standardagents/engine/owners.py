"""Who runs an execution: owner ids (``host:pid:nonce``) and whether their process is gone.

Below both crash recovery and resuming, which judge claims and executions by it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["LIVE_OWNERS", "RELEASED", "gone"]

#: prefix of the owner a process shutting down leaves on what it lets go (engine/handover.py)
RELEASED = "released:"

#: the owner ids of the runtimes open in this process (an owner id naming this host and this
#: pid but missing here belonged to an earlier process that had the same pid)
LIVE_OWNERS: set[str] = set()


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
