"""Prometheus instruments of executions and HTTP requests, served as ``/metrics``.

With several worker processes (``serve --workers N``) each process writes its samples to
``PROMETHEUS_MULTIPROC_DIR`` (prometheus-client's multiprocess mode) and any worker's
``/metrics`` answers with the sum over all of them. The server sets that folder up, fresh for
each run, before the workers start (:func:`prepare_multiprocess_dir`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Any

__all__ = ["MULTIPROC_ENV", "Meter", "active", "enable", "exposition", "prepare_multiprocess_dir"]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
#: ``public`` serves /metrics without a token; ``off`` records nothing and has no route
SETTING_ENV = "STANDARDAGENTS_METRICS"

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
            if entry.endswith(".db"):
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


class Meter:
    """The instruments (names follow Prometheus conventions, ``standardagents_`` first)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.multiprocess = bool(os.environ.get(MULTIPROC_ENV))
        # in multiprocess mode samples go to files; the registry is only used without it
        self.registry = CollectorRegistry(auto_describe=True)
        reg = self.registry
        self.turns_started = Counter("standardagents_turns_started", "Executions started, by agent.",
                                     ["agent"], registry=reg)
        self.turns_ended = Counter("standardagents_turns_ended", "Executions ended, by agent and outcome.",
                                   ["agent", "outcome"], registry=reg)
        self.turn_seconds = Histogram("standardagents_turn_duration_seconds", "Duration of executions.",
                                      ["agent"], buckets=_SECONDS, registry=reg)
        self.step_seconds = Histogram("standardagents_step_duration_seconds",
                                      "Duration of steps (a model call and its tool calls).",
                                      ["agent"], buckets=_SECONDS, registry=reg)
        self.model_seconds = Histogram("standardagents_model_call_duration_seconds",
                                       "Duration of model calls, by model definition and status.",
                                       ["model", "status"], buckets=_SECONDS, registry=reg)
        self.ttft_seconds = Histogram("standardagents_model_time_to_first_token_seconds",
                                      "Time to the first streamed delta of model calls.",
                                      ["model"], buckets=_SECONDS, registry=reg)
        self.tokens = Counter("standardagents_model_tokens", "Tokens used, by model and type (input, output).",
                              ["model", "type"], registry=reg)
        self.cost_usd = Counter("standardagents_model_cost_usd", "Cost of model calls in USD, by model "
                                "(calls whose price is known).", ["model"], registry=reg)
        self.tool_calls = Counter("standardagents_tool_calls", "Tool calls, by tool and status.",
                                  ["tool", "status"], registry=reg)
        self.running = Gauge("standardagents_running_executions", "Executions running now.",
                             registry=reg, multiprocess_mode="livesum")
        self.pending_approvals = Gauge("standardagents_pending_approvals",
                                       "Tool calls waiting for a person's decision (read from the store).",
                                       registry=reg, multiprocess_mode="mostrecent")
        self.inbox = Gauge("standardagents_inbox_messages",
                           "Messages waiting in inboxes for their busy thread (read from the store).",
                           registry=reg, multiprocess_mode="mostrecent")
        self.effects = Gauge("standardagents_effects", "Effects by state: due (pending, run time reached), "
                             "scheduled (pending, later), failed (read from the store).",
                             ["state"], registry=reg, multiprocess_mode="mostrecent")
        self.relay_lag = Histogram("standardagents_relay_lag_seconds",
                                   "Time from an event's publication on another worker to its delivery "
                                   "here through the PostgreSQL relay (the two hosts' clocks must agree).",
                                   buckets=RELAY_SECONDS, registry=reg)
        self.http_requests = Counter("standardagents_http_requests", "HTTP requests, by method, route and status.",
                                     ["method", "route", "status"], registry=reg)
        self.http_seconds = Histogram("standardagents_http_request_duration_seconds",
                                      "Duration of HTTP requests (to the end of the response).",
                                      ["method", "route"], buckets=_SECONDS, registry=reg)

    # recorded by the engine's probes ------------------------------------------------------
    def turn_started(self, agent: str) -> None:
        self.turns_started.labels(agent).inc()
        self.running.inc()

    def turn_ended(self, agent: str, outcome: str, seconds: float) -> None:
        self.turns_ended.labels(agent, outcome).inc()
        self.turn_seconds.labels(agent).observe(seconds)
        self.running.dec()

    def step(self, agent: str, seconds: float) -> None:
        self.step_seconds.labels(agent).observe(seconds)

    def model_call(self, model: str, seconds: float, ttft: float | None, usage: Any, status: str) -> None:
        self.model_seconds.labels(model, status).observe(seconds)
        if ttft is not None:
            self.ttft_seconds.labels(model).observe(ttft)
        if usage is not None:
            self.tokens.labels(model, "input").inc(usage.prompt_tokens)
            self.tokens.labels(model, "output").inc(usage.completion_tokens)

    def cost(self, model: str, usd: float) -> None:
        self.cost_usd.labels(model).inc(usd)

    def tool_call(self, tool: str, status: str) -> None:
        self.tool_calls.labels(tool, status).inc()

    def http_request(self, method: str, route: str, status: int, seconds: float) -> None:
        self.http_requests.labels(method, route, str(status)).inc()
        self.http_seconds.labels(method, route).observe(seconds)

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

    def exposition(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

        if self.multiprocess:
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def process_exit() -> None:
    """This process stops serving: its live gauges leave the multiprocess sums."""
    if _active is not None and _active.multiprocess:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(os.getpid())


def exposition() -> tuple[bytes, str] | None:
    meter = active()
    return None if meter is None else meter.exposition()
