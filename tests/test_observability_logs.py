"""JSON logs: records inside a turn carry the trace and the thread; the server's own lines
are JSON too with ``--log-format json``."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from engine_helpers import stub_model
from standardagents import define_agent, define_prompt, define_tool, observability
from standardagents.observability.logs import JsonFormatter
from standardagents.testing.openai_stub import StubReply

EXE = Path(sys.executable).parent / "standardagents"
QUICKSTART = Path(__file__).parent.parent / "examples" / "quickstart"


@define_tool
def noisy(text: str) -> str:
    """Logs what it is given."""
    logging.getLogger("standardagents.tools.noisy").warning("noisy got %s", text)
    return "logged"


async def test_records_inside_a_turn_carry_trace_span_thread_and_execution(stub, make_runtime):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("standardagents.tools.noisy")
    logger.addHandler(handler)
    observability.set_tracer_provider(provider)
    try:
        stub.queue(StubReply(tool_calls=[("noisy", '{"text": "hello"}')]), "Logged it.")
        rt = await make_runtime(define_agent(name="helper", side_a={"prompt": "main"}),
                                define_prompt(name="main", prompt="x", tools=["noisy"]), noisy, stub_model(stub))
        result = await rt.run("helper", "log hello")
        logger.warning("outside any turn")
    finally:
        observability.set_tracer_provider(None)
        logger.removeHandler(handler)
    inside, outside = (json.loads(line) for line in stream.getvalue().splitlines())
    (tool_span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool noisy"]
    assert inside["message"] == "noisy got hello" and inside["level"] == "warning"
    assert inside["logger"] == "standardagents.tools.noisy"
    assert inside["trace_id"] == format(tool_span.context.trace_id, "032x")
    assert inside["span_id"] == format(tool_span.context.span_id, "016x")
    assert (inside["thread_id"], inside["execution_id"]) == (result.thread_id, result.execution_id)
    assert outside["message"] == "outside any turn"
    assert not {"trace_id", "span_id", "thread_id", "execution_id"} & set(outside)


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve_json(tmp_path: Path) -> list[dict[str, object]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OTEL_", "STANDARDAGENTS_"))}
    proc = subprocess.Popen([str(EXE), "serve", str(QUICKSTART), "--port", str(_port()), "--log-format", "json",
                             "--database-url", f"sqlite:///{tmp_path / 'logs.db'}"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    records = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            records.append(json.loads(line))
            if "running on" in str(records[-1]["message"]).lower():
                break
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=20)
    return records


def test_serve_with_log_format_json_writes_json_lines(tmp_path: Path) -> None:
    records = _serve_json(tmp_path)
    assert records and all({"time", "level", "logger", "message"} <= set(r) for r in records)
    assert records[-1]["logger"] == "uvicorn.error"
