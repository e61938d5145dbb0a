"""Prometheus instruments of executions and HTTP requests, served as ``/metrics``.

The instruments are plain in-memory sums (a dictionary update per event: no lock, no file
write), turned into the Prometheus exposition only when ``/metrics`` is scraped. They are
updated from the event loop's thread, as everything in the engine and the server is.

With several worker processes (``serve --workers N``) each worker writes a snapshot of its
sums to a file of its own in ``PROMETHEUS_MULTIPROC_DIR`` at most every
:data:`FLUSH_SECONDS` (and when it stops), and a scrape of any worker adds its own live sums
to the other workers' snapshots; a worker's running executions count only while it lives.
The server sets that folder up, fresh for each run, before the workers start
(:func:`prepare_multiprocess_dir`). Instruments other code registers on
:attr:`Meter.registry` with ``prometheus_client`` itself (online eval scores) keep
prometheus-client's own multiprocess files and are exposed beside ours.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["MULTIPROC_ENV", "Meter", "active", "enable", "exposition", "prepare_multiprocess_dir"]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
#: ``public`` serves /metrics without a token; ``off`` records nothing and has no route
SETTING_ENV = "STANDARDAGENTS_METRICS"
#: how often (at most) a worker writes its sums for the other workers' scrapes
FLUSH_SECONDS = 0.05
#: the snapshot files of our instruments in the multiprocess folder (``<prefix><pid>.json``)
SNAPSHOT_PREFIX = "standardagents-"

_active: Meter | None = None

#: relay lags are mostly milliseconds: finer buckets at the low end
RELAY_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


def active() -> Meter | None:
    """The instruments executions record into, or None when metrics are off."""
    return _active


def setting() -> str:
    """``on`` (default, behind the API's authentication), ``public`` or ``off``."""
    value = os.environ.get(SETTING_ENV, "on").strip().lower()
    return value if value in ("on", "public", "off") else "on"


def prepare_multiprocess_dir() -> str:
    """A fresh, empty folder for this run's multiprocess samples, exported in the
    environment so the worker processes started afterwards share it. A folder the user
    named is emptied of an earlier run's files; otherwise a new temporary one is made."""
    named = os.environ.get(MULTIPROC_ENV)
    if named:
        os.makedirs(named, exist_ok=True)
        for entry in os.listdir(named):
            if entry.endswith(".db") or (entry.startswith(SNAPSHOT_PREFIX) and entry.endswith(".json")):
                os.unlink(os.path.join(named, entry))
        return named
    folder = tempfile.mkdtemp(prefix="standardagents-metrics-")
    os.environ[MULTIPROC_ENV] = folder
    return folder


def remove_multiprocess_dir(folder: str) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def enable() -> Meter | None:
    """Create the instruments once per process (None when prometheus-client is missing or
    ``STANDARDAGENTS_METRICS=off``)."""
    global _active
    if _active is not None:
        return _active
    if setting() == "off":
        return None
    try:
        import prometheus_client  # noqa: F401
    except ImportError:  # pragma: no cover - it is a dependency; kept for stripped installs
        return None
    _active = Meter()
    return _active


# instruments: sums in dictionaries keyed by the tuple of label values -------------------------
class _Counter:
    __slots__ = ("doc", "labelnames", "name", "series")

    def __init__(self, name: str, doc: str, labelnames: Sequence[str] = ()) -> None:
        self.name, self.doc, self.labelnames = name, doc, tuple(labelnames)
        self.series: dict[tuple[str, ...], float] = {}

    def labels(self, *values: str) -> _CounterChild:
        return _CounterChild(self.series, tuple(values))

    def inc(self, amount: float = 1.0) -> None:
        self.series[()] = self.series.get((), 0.0) + amount


class _CounterChild:
    __slots__ = ("key", "series")

    def __init__(self, series: dict[tuple[str, ...], float], key: tuple[str, ...]) -> None:
        self.series, self.key = series, key

    def inc(self, amount: float = 1.0) -> None:
        self.series[self.key] = self.series.get(self.key, 0.0) + amount

    def set(self, value: float) -> None:
        self.series[self.key] = value


class _Gauge(_Counter):
    __slots__ = ()

    def set(self, value: float) -> None:
        self.series[()] = value

    def dec(self, amount: float = 1.0) -> None:
        self.inc(-amount)


class _Histogram:
    """Per label values: the count in each bucket (not cumulative; the last is +Inf), then the sum."""

    __slots__ = ("bounds", "doc", "labelnames", "name", "series")

    def __init__(self, name: str, doc: str, labelnames: Sequence[str] = (), *, buckets: Sequence[float]) -> None:
        self.name, self.doc, self.labelnames = name, doc, tuple(labelnames)
        self.bounds = tuple(buckets)
        self.series: dict[tuple[str, ...], list[float]] = {}

    def labels(self, *values: str) -> _HistogramChild:
        return _HistogramChild(self, tuple(values))

    def observe(self, value: float, key: tuple[str, ...] = ()) -> None:
        row = self.series.get(key)
        if row is None:
            row = self.series[key] = [0.0] * (len(self.bounds) + 2)
        row[bisect_left(self.bounds, value)] += 1  # a bucket's bound is inclusive (le)
        row[-1] += value


class _HistogramChild:
    __slots__ = ("histogram", "key")

    def __init__(self, histogram: _Histogram, key: tuple[str, ...]) -> None:
        self.histogram, self.key = histogram, key

    def observe(self, value: float) -> None:
        self.histogram.observe(value, self.key)


class Meter:
    """The instruments (names follow Prometheus conventions, ``standardagents_`` first)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry

        self.multiprocess = bool(os.environ.get(MULTIPROC_ENV))
        #: for instruments other code makes with prometheus-client itself; ours are collected
        #: from it too when there is one process
        self.registry = CollectorRegistry(auto_describe=True)
        self.turns_started = _Counter("standardagents_turns_started", "Executions started, by agent.", ["agent"])
        self.turns_ended = _Counter("standardagents_turns_ended", "Executions ended, by agent and outcome.",
                                    ["agent", "outcome"])
        self.turn_seconds = _Histogram("standardagents_turn_duration_seconds", "Duration of executions.",
                                       ["agent"], buckets=_SECONDS)
        self.step_seconds = _Histogram("standardagents_step_duration_seconds",
                                       "Duration of steps (a model call and its tool calls).",
                                       ["agent"], buckets=_SECONDS)
        self.model_seconds = _Histogram("standardagents_model_call_duration_seconds",
                                        "Duration of model calls, by model definition and status.",
                                        ["model", "status"], buckets=_SECONDS)
        self.ttft_seconds = _Histogram("standardagents_model_time_to_first_token_seconds",
                                       "Time to the first streamed delta of model calls.",
                                       ["model"], buckets=_SECONDS)
        self.tokens = _Counter("standardagents_model_tokens", "Tokens used, by model and type (input, output).",
                               ["model", "type"])
        self.cost_usd = _Counter("standardagents_model_cost_usd", "Cost of model calls in USD, by model "
                                 "(calls whose price is known).", ["model"])
        self.tool_calls = _Counter("standardagents_tool_calls", "Tool calls, by tool and status.", ["tool", "status"])
        self.running = _Gauge("standardagents_running_executions", "Executions running now.")
        self.pending_approvals = _Gauge("standardagents_pending_approvals",
                                        "Tool calls waiting for a person's decision (read from the store).")
        self.inbox = _Gauge("standardagents_inbox_messages",
                            "Messages waiting in inboxes for their busy thread (read from the store).")
        self.effects = _Gauge("standardagents_effects", "Effects by state: due (pending, run time reached), "
                              "scheduled (pending, later), failed (read from the store).", ["state"])
        self.relay_lag = _Histogram("standardagents_relay_lag_seconds",
                                    "Time from an event's publication on another worker to its delivery "
                                    "here through the PostgreSQL relay (the two hosts' clocks must agree).",
                                    buckets=RELAY_SECONDS)
        self.http_requests = _Counter("standardagents_http_requests", "HTTP requests, by method, route and status.",
                                      ["method", "route", "status"])
        self.http_seconds = _Histogram("standardagents_http_request_duration_seconds",
                                       "Duration of HTTP requests (to the end of the response).",
                                       ["method", "route"], buckets=_SECONDS)
        self.running.set(0.0)
        self.pending_approvals.set(0.0)
        self.inbox.set(0.0)
        #: summed over the workers (the store's gauges are read by the scraping worker alone)
        self._summed: tuple[_Counter | _Histogram, ...] = (
            self.turns_started, self.turns_ended, self.turn_seconds, self.step_seconds, self.model_seconds,
            self.ttft_seconds, self.tokens, self.cost_usd, self.tool_calls, self.running, self.relay_lag,
            self.http_requests, self.http_seconds)
        self._store_gauges = (self.pending_approvals, self.inbox, self.effects)
        self._flusher: _Flusher | None = None
        if self.multiprocess:
            self._flusher = _Flusher(self, os.environ[MULTIPROC_ENV])
            os.register_at_fork(after_in_child=self._forked)
        else:
            self.registry.register(_Collector(self))

    def _forked(self) -> None:
        """A process forked from this one is a worker of its own: it starts from zero (the
        parent's sums stay the parent's) with a snapshot file and writer thread of its own."""
        if self._flusher is None:
            return
        for instrument in (*self._summed, *self._store_gauges):
            instrument.series.clear()
        self.running.set(0.0)
        self._flusher = _Flusher(self, os.environ[MULTIPROC_ENV])

    # recorded by the engine's probes ------------------------------------------------------
    def turn_started(self, agent: str) -> None:
        series = self.turns_started.series
        key = (agent,)
        series[key] = series.get(key, 0.0) + 1
        running = self.running.series
        running[()] = running.get((), 0.0) + 1

    def turn_ended(self, agent: str, outcome: str, seconds: float) -> None:
        series = self.turns_ended.series
        key = (agent, outcome)
        series[key] = series.get(key, 0.0) + 1
        self.turn_seconds.observe(seconds, (agent,))
        running = self.running.series
        running[()] = running.get((), 0.0) - 1

    def step(self, agent: str, seconds: float) -> None:
        self.step_seconds.observe(seconds, (agent,))

    def model_call(self, model: str, seconds: float, ttft: float | None, usage: Any, status: str) -> None:
        self.model_seconds.observe(seconds, (model, status))
        if ttft is not None:
            self.ttft_seconds.observe(ttft, (model,))
        if usage is not None:
            series = self.tokens.series
            key = (model, "input")
            series[key] = series.get(key, 0.0) + usage.prompt_tokens
            key = (model, "output")
            series[key] = series.get(key, 0.0) + usage.completion_tokens

    def cost(self, model: str, usd: float) -> None:
        series = self.cost_usd.series
        series[(model,)] = series.get((model,), 0.0) + usd

    def tool_call(self, tool: str, status: str) -> None:
        series = self.tool_calls.series
        key = (tool, status)
        series[key] = series.get(key, 0.0) + 1

    def http_request(self, method: str, route: str, status: int, seconds: float) -> None:
        series = self.http_requests.series
        key = (method, route, str(status))
        series[key] = series.get(key, 0.0) + 1
        self.http_seconds.observe(seconds, (method, route))

    # scrapes ---------------------------------------------------------------------------------
    async def refresh_from_store(self, store: Any) -> None:
        """Gauges whose truth is the store (shared by every worker)."""
        waiting = await store.list_executions(status="waiting")
        pending = 0
        for record in waiting:
            decided = record.state.get("decisions", {})
            pending += sum(1 for p in record.state.get("pending", []) if p.get("id") not in decided)
        self.pending_approvals.set(pending)
        self.inbox.set(len(await store.list_scope("inbox")))
        now = int(time.time() * 1000)
        due = scheduled = 0
        for effect in await store.list_effects(status="pending"):
            if effect.run_at <= now:
                due += 1
            else:
                scheduled += 1
        self.effects.labels("due").set(due)
        self.effects.labels("scheduled").set(scheduled)
        self.effects.labels("failed").set(len(await store.list_effects(status="failed")))

    def snapshot(self) -> dict[str, Any]:
        """This process's sums, as written for the other workers (JSON-ready)."""
        return {"pid": os.getpid(),
                "series": {i.name: [[list(k), v] for k, v in list(i.series.items())] for i in self._summed}}

    def exposition(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

        if self.multiprocess:
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)  # instruments made with prometheus-client itself
            registry.register(_Collector(self, _others(os.environ[MULTIPROC_ENV])))
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def close(self) -> None:
        """This process stops recording: its last sums are written, its running count left out."""
        if self._flusher is not None:
            self.running.series[()] = 0.0
            self._flusher.stop()
            self._flusher = None


def _others(folder: str) -> list[dict[str, Any]]:
    """The other workers' last snapshots; a worker that is gone no longer counts as running."""
    mine = os.getpid()
    found: list[dict[str, Any]] = []
    try:
        entries = os.listdir(folder)
    except OSError:
        return found
    for entry in entries:
        if not (entry.startswith(SNAPSHOT_PREFIX) and entry.endswith(".json")):
            continue
        try:
            with open(os.path.join(folder, entry), "rb") as f:
                data = json.loads(f.read())
        except (OSError, ValueError):
            continue
        pid = data.get("pid")
        if pid == mine:
            continue
        if not _alive(pid):
            data["series"].pop("standardagents_running_executions", None)
        found.append(data)
    return found


def _alive(pid: Any) -> bool:
    try:
        os.kill(int(pid), 0)
    except (OSError, ValueError, TypeError):
        return False
    return True


class _Flusher:
    """Writes the meter's snapshot to its file when something was recorded, at most every
    :data:`FLUSH_SECONDS`, from a thread of its own (the event loop never waits on the disk)."""

    def __init__(self, meter: Meter, folder: str) -> None:
        self.meter = meter
        self.path = os.path.join(folder, f"{SNAPSHOT_PREFIX}{os.getpid()}.json")
        self.stopping = threading.Event()
        self.last: bytes = b""
        self.thread = threading.Thread(target=self._run, name="standardagents-metrics", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.wait(FLUSH_SECONDS):
            self.flush()
        self.flush()

    def flush(self) -> None:
        data = json.dumps(self.meter.snapshot()["series"], separators=(",", ":")).encode()
        if data == self.last:
            return
        body = b'{"pid":%d,"series":%s}' % (os.getpid(), data)
        temporary = f"{self.path}.tmp"
        try:
            with open(temporary, "wb") as f:
                f.write(body)
            os.replace(temporary, self.path)
        except OSError:  # the folder went away (the server is stopping): nothing to tell
            return
        self.last = data

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)


class _Collector:
    """Our sums (and the other workers' snapshots, when given) as Prometheus metric families."""

    def __init__(self, meter: Meter, others: list[dict[str, Any]] | None = None) -> None:
        self.meter = meter
        self.others = others or []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )
        from prometheus_client.utils import floatToGoString

        for instrument in (*self.meter._summed, *self.meter._store_gauges):
            merged: dict[tuple[str, ...], Any] = {}
            histogram = isinstance(instrument, _Histogram)
            own: dict[tuple[str, ...], Any] = instrument.series
            for key, value in list(own.items()):
                merged[key] = list(value) if histogram else value
            for other in self.others:
                for key_list, value in other["series"].get(instrument.name, ()):
                    key = tuple(key_list)
                    if histogram:
                        row = merged.get(key)
                        merged[key] = value if row is None else [a + b for a, b in zip(row, value, strict=True)]
                    else:
                        merged[key] = merged.get(key, 0.0) + value
            labels = list(instrument.labelnames)
            if isinstance(instrument, _Histogram):
                family: Any = HistogramMetricFamily(instrument.name, instrument.doc, labels=labels)
                if not merged and not labels:
                    merged[()] = [0.0] * (len(instrument.bounds) + 2)
                bounds = [floatToGoString(b) for b in instrument.bounds] + ["+Inf"]
                for key, row in merged.items():
                    cumulative, buckets = 0.0, []
                    for bound, count in zip(bounds, row[:-1], strict=True):
                        cumulative += count
                        buckets.append((bound, cumulative))
                    family.add_metric(list(key), buckets, row[-1])
            elif isinstance(instrument, _Gauge):
                family = GaugeMetricFamily(instrument.name, instrument.doc, labels=labels)
                for key, value in merged.items():
                    family.add_metric(list(key), value)
            else:
                family = CounterMetricFamily(instrument.name, instrument.doc, labels=labels)
                for key, value in merged.items():
                    family.add_metric(list(key), value)
            yield family


def process_exit() -> None:
    """This process stops serving: its last sums are written and its running executions
    leave the sums (prometheus-client's own files too)."""
    if _active is not None and _active.multiprocess:
        from prometheus_client import multiprocess

        _active.close()
        multiprocess.mark_process_dead(os.getpid())


def exposition() -> tuple[bytes, str] | None:
    meter = active()
    return None if meter is None else meter.exposition()
