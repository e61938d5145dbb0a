"""Spans leave a real ``standardagents run`` process over OTLP/HTTP, configured only by the
standard ``OTEL_*`` variables, and arrive at a receiver this test runs on 127.0.0.1.

The receiver is a plain HTTP server decoding the OTLP protobuf payload with the
``opentelemetry-proto`` types (the same ones any collector uses)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

EXE = Path(sys.executable).parent / "standardagents"
QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart"


class Receiver(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.paths: list[str] = []

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def spans(self) -> list[tuple[dict[str, Any], Any]]:
        """(resource attributes, span) of every span received."""
        out = []
        for request in self.requests:
            for rs in request.resource_spans:
                resource = {a.key: a.value.string_value for a in rs.resource.attributes}
                for ss in rs.scope_spans:
                    out.extend((resource, span) for span in ss.spans)
        return out


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        self.server.paths.append(self.path)
        if self.path == "/v1/metrics":
            metrics = ExportMetricsServiceRequest()
            metrics.ParseFromString(body)
            self.server.metrics.append(metrics)
            reply = ExportMetricsServiceResponse().SerializeToString()
        else:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            self.server.requests.append(request)
            reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _attrs(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in span.attributes:
        v = a.value
        out[a.key] = v.string_value if v.HasField("string_value") else v.int_value if v.HasField("int_value") else v
    return out


def test_a_run_exports_its_span_tree_over_otlp_http(receiver: Receiver, tmp_path: Path) -> None:
    project = tmp_path / "qs"
    shutil.copytree(QUICKSTART, project)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_", "STANDARDAGENTS_"))}
    env.update(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_SERVICE_NAME="otlp-test",
               OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test")
    done = subprocess.run([str(EXE), "run", str(project), "--agent", "assistant",
                           "What is 6 * 7, what time is it, and can you research both?"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert set(receiver.paths) == {"/v1/traces"}
    spans = receiver.spans()
    by_name = {span.name: span for _, span in spans}
    agent = by_name["invoke_agent assistant"]
    tool = by_name["execute_tool calculate"]
    own = [span.name for _, span in spans if span.parent_span_id == agent.span_id]
    assert sorted(n for n in own if not n.startswith("hook ")) == [
        "chat offline", "chat offline", "execute_tool calculate", "execute_tool current_time", "execute_tool researcher"]
    assert own.count("hook tool_call_done") == 3  # the project's count_tool_calls hook, once per call
    # the researcher subagent ran inside the assistant's tool call
    assert by_name["invoke_agent researcher"].parent_span_id == by_name["execute_tool researcher"].span_id
    assert tool.parent_span_id == agent.span_id and len({s.trace_id for _, s in spans}) == 1
    assert _attrs(agent)["gen_ai.agent.name"] == "assistant"
    assert _attrs(tool)["gen_ai.tool.name"] == "calculate"
    resource = spans[0][0]
    assert (resource["service.name"], resource["deployment.environment"]) == ("otlp-test", "test")


def test_a_run_exports_its_metrics_over_otlp_http_when_asked(receiver: Receiver, tmp_path: Path) -> None:
    project = tmp_path / "qs"
    shutil.copytree(QUICKSTART, project)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_", "STANDARDAGENTS_"))}
    env.update(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_TRACES_EXPORTER="none",
               OTEL_METRICS_EXPORTER="otlp", OTEL_SERVICE_NAME="otlp-metrics-test")
    done = subprocess.run([str(EXE), "run", str(project), "--agent", "assistant",
                           "What is 6 * 7, what time is it, and can you research both?"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert set(receiver.paths) == {"/v1/metrics"}  # traces were turned off
    sums: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for request in receiver.metrics:
        for rm in request.resource_metrics:
            assert {a.key: a.value.string_value for a in rm.resource.attributes}["service.name"] == "otlp-metrics-test"
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.HasField("sum"):
                        for point in metric.sum.data_points:
                            labels = tuple(sorted((a.key, a.value.string_value) for a in point.attributes))
                            sums[(metric.name, labels)] = point.as_int or point.as_double
    assert sums[("standardagents.turns.started", (("agent", "assistant"),))] == 1
    assert sums[("standardagents.turns.started", (("agent", "researcher"),))] == 1  # the subagent's turn
    assert sums[("standardagents.tool_calls", (("status", "success"), ("tool", "calculate")))] == 1
