"""Who runs an execution: owner ids, and whether the process an owner id names is gone.

An owner id is ``host/namespace:pid:start-nonce``. The *namespace* names the PID namespace the
process lives in (the kernel's boot id and the namespace's inode), because only inside one
PID namespace does a pid name one process: two containers may share a hostname (host
networking, replicas given the same ``hostname:``), and each has its own pid 1. So a pid is
looked at only when the owner's namespace is this process's own; any other owner (another
host, another container on this host, an id of an older version without a namespace) is
judged by its heartbeat alone.

Inside the namespace the id also carries the process's start time (``/proc``), which tells a
live owner from a later process that got the same pid: a process that still runs keeps its
turns however late its heartbeat (an overloaded worker must not see them run a second time
elsewhere), and one that is gone gives them up at once.
"""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .ports import OwnerHost

__all__ = ["LIVE_OWNERS", "NAMESPACE", "RELEASED", "OwnerId", "gone", "new_owner", "parse_owner", "still_running"]

#: prefix of the owner a process shutting down leaves on what it lets go (engine/handover.py)
RELEASED = "released:"

#: the owner ids of the runtimes open in this process (an owner id naming this namespace and
#: this pid but missing here belonged to an earlier process that had the same pid)
LIVE_OWNERS: set[str] = set()


def _namespace() -> str:
    """This process's PID namespace, told apart from every other one a database may see:
    the boot id (a restarted host reuses inode numbers) and the namespace's inode. Empty when
    the kernel does not say (not Linux): then no pid is trusted, only heartbeats."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")[:12]
        inode = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return ""
    return f"{boot}.{inode}" if boot else ""


def _proc_is_ours() -> bool:
    """Whether ``/proc`` shows this PID namespace (``unshare --pid`` without a new ``/proc``
    leaves the parent namespace's, where our pids mean other processes)."""
    try:
        return os.readlink("/proc/self") == str(os.getpid())
    except OSError:
        return False


#: this process's PID namespace id ("" where it cannot be known)
NAMESPACE = _namespace()
_PROC = bool(NAMESPACE) and _proc_is_ours()


class OwnerId(NamedTuple):
    """The parts of an owner id: ``namespace`` is "" for ids that name none."""

    host: str
    namespace: str
    pid: int | None
    started: str


def _start_time(pid: int) -> str | None:
    """When the process ``pid`` of this namespace started (clock ticks since boot), or None
    when it does not run (a zombie, reaped or not, counts as not running)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


def new_owner(host: str | None = None) -> str:
    """A new owner id for a runtime of this process."""
    pid = os.getpid()
    started = (_start_time(pid) if _PROC else None) or "0"
    name = (host or socket.gethostname()).replace(":", "_").replace("/", "_")
    return f"{name}/{NAMESPACE}:{pid}:{started}-{secrets.token_hex(6)}"


def parse_owner(owner: str) -> OwnerId:
    """The parts of an owner id (also the older ``host:pid:nonce`` and ``host:pid`` forms,
    which name no namespace)."""
    head, _, last = owner.rpartition(":")
    if last.isdigit():  # host:pid
        host, pid_text, started = head, last, ""
    else:
        host, _, pid_text = head.rpartition(":")
        started = last.partition("-")[0]
    host, _, namespace = host.partition("/")
    return OwnerId(host, namespace, int(pid_text) if pid_text.isdigit() else None, started)


def _in_this_namespace(parts: OwnerId) -> bool:
    return bool(NAMESPACE) and parts.namespace == NAMESPACE and parts.pid is not None


def still_running(owner: str) -> bool:
    """Whether ``owner`` is a process of this PID namespace that certainly still runs: its
    pid runs and started when the owner id says (any other owner: False)."""
    parts = parse_owner(owner)
    if not (_PROC and _in_this_namespace(parts)) or not parts.started.isdigit() or parts.started == "0":
        return False
    assert parts.pid is not None
    return _start_time(parts.pid) == parts.started


def gone(rt: OwnerHost, owner: str, *, fresh: bool) -> bool:
    """Whether the runtime named ``owner`` is gone. ``fresh``: its heartbeat is recent.

    In this PID namespace a pid is looked at: an owner naming this very process is alive only
    while it is one of the runtimes open here; a pid that no longer runs, or runs a process
    started at another time, is gone at once; a live one keeps its turns. Any other owner is
    gone when its heartbeat is stale."""
    if owner == rt.owner or owner in LIVE_OWNERS:
        return False
    if owner.startswith(RELEASED):  # let go by a process shutting down
        return True
    parts = parse_owner(owner)
    if _in_this_namespace(parts):
        assert parts.pid is not None
        if parts.pid == os.getpid() or not _alive(parts.pid):
            return True
        if _PROC and parts.started.isdigit() and parts.started != "0":
            # running, or a zombie (killed, not yet reaped), or another process with its pid
            return _start_time(parts.pid) != parts.started
    return not fresh


def _alive(pid: int) -> bool:
    """Whether a process of this namespace with this pid runs (not necessarily the same one)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
