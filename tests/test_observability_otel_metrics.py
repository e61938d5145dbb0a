"""Execution metrics through the OpenTelemetry metrics API, read with the SDK's
``InMemoryMetricReader``: recorded when a ``MeterProvider`` is configured, not otherwise."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from engine_helpers import stub_model
from standardagents import define_agent, define_prompt, define_tool, observability
from standardagents.observability import otel_metrics
from standardagents.testing.openai_stub import StubReply

AGENT = define_agent(name="helper", side_a={"prompt": "main"})
PROMPT = define_prompt(name="main", prompt="You help.", tools=["add"])


@define_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    found = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[found])
    observability.set_meter_provider(provider)
    try:
        yield found
    finally:
        observability.set_meter_provider(None)
        provider.shutdown()


def points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    """Every data point by instrument name (cumulative, so a later read sees all so far)."""
    out: dict[str, list[Any]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            assert scope.scope.name == "standardagents"
            for metric in scope.metrics:
                out.setdefault(metric.name, []).extend(metric.data.data_points)
    return out


def value(found: dict[str, list[Any]], name: str, **attributes: Any) -> Any:
    (point,) = [p for p in found.get(name, ()) if all(p.attributes.get(k) == v for k, v in attributes.items())]
    return point


async def test_a_scripted_turn_is_counted_through_the_meter_provider(stub, make_runtime, reader):
    usage = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}
    stub.queue(StubReply(tool_calls=[("add", json.dumps({"a": 2, "b": 3}))], usage=usage),
               StubReply(text="It is 5.", usage={"prompt_tokens": 1200, "completion_tokens": 20, "total_tokens": 1220}))
    rt = await make_runtime(AGENT, PROMPT, add, stub_model(stub, prices={"input": 3.0, "output": 15.0}))
    result = await rt.run("helper", "2+3?")
    assert result.text == "It is 5."
    found = points(reader)
    assert value(found, "standardagents.turns.started", agent="helper").value == 1
    assert value(found, "standardagents.turns.ended", agent="helper", outcome="response").value == 1
    assert value(found, "standardagents.running_executions").value == 0
    assert value(found, "standardagents.turn.duration", agent="helper").count == 1
    assert value(found, "standardagents.step.duration", agent="helper").count == 2
    calls = value(found, "standardagents.model_call.duration", model="default", status="ok")
    assert calls.count == 2
    assert calls.explicit_bounds == otel_metrics.SECONDS
    assert value(found, "standardagents.model.time_to_first_token", model="default").count == 2
    assert value(found, "standardagents.model.tokens", model="default", type="input").value == 2200
    assert value(found, "standardagents.model.tokens", model="default", type="output").value == 520
    assert value(found, "standardagents.tool_calls", tool="add", status="success").value == 1
    assert value(found, "standardagents.model.cost", model="default").value == pytest.approx(result.cost)
    assert result.cost is not None and result.cost > 0


async def test_nothing_is_recorded_without_a_meter_provider(stub, make_runtime, reader):
    rt = await make_runtime(AGENT, PROMPT, add, stub_model(stub))
    stub.queue("one")
    await rt.run("helper", "hi")
    observability.set_meter_provider(None)  # back to the global provider, which is the API's no-op
    assert otel_metrics.active() is None
    stub.queue("two")
    await rt.run("helper", "hi")
    assert value(points(reader), "standardagents.turns.started", agent="helper").value == 1


_GLOBAL_PROVIDER_SCRIPT = """
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from standardagents import observability
from standardagents.observability import otel_metrics

assert otel_metrics.active() is None  # the API's stand-in: nothing to record into
observability.relay_lag(0.002)
reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
observability.relay_lag(0.003)
counts = [p.count for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics
          for m in sm.metrics if m.name == "standardagents.relay.lag" for p in m.data.data_points]
print(counts)
"""


def test_a_global_meter_provider_set_after_start_records_relay_lags() -> None:
    # a process of its own: the API's global provider can be set only once per process
    done = subprocess.run([sys.executable, "-c", _GLOBAL_PROVIDER_SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[1]"
