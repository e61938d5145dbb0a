"""JSON logs: records inside a turn carry the trace and the thread; with ``--log-format json``
every line of a served process is JSON: the server's, the start-up line, and the project's own
loggers (INFO included), whose records inside a turn carry the turn's ids."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from engine_helpers import stub_model
from standardagents import define_agent, define_prompt, define_tool, observability
from standardagents.observability.logs import JsonFormatter
from standardagents.testing.openai_stub import StubReply
from test_observability_otlp import Receiver

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


_LOGGING_PROJECT = {
    "agents/agents/helper.py": """
        from standardagents import define_agent
        helper = define_agent(name="helper", side_a={"prompt": "helper_prompt", "max_steps": 4})
    """,
    "agents/prompts/helper_prompt.py": """
        from standardagents import define_prompt
        helper_prompt = define_prompt(name="helper_prompt", prompt="You take notes.", tools=["note"])
    """,
    "agents/tools/note.py": """
        import logging
        from standardagents import define_tool

        @define_tool
        def note(text: str) -> str:
            '''Note something down.'''
            logging.getLogger("mytool").info("noted %s", text)
            return "noted"
    """,
    "agents/models/default.py": """
        from standardagents import define_model
        default = define_model(name="default", provider="test", model="offline")
    """,
}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """An OTLP/HTTP receiver on 127.0.0.1, so the served process traces its turns."""
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _json_lines(text: str, where: str) -> list[dict[str, Any]]:
    records = []
    for line in text.splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"a line on {where} is not JSON: {line!r}") from None
    return records


def test_serve_with_log_format_json_writes_every_line_as_json_and_a_tools_record_with_its_turns_ids(
        tmp_path: Path, receiver: Receiver) -> None:
    project = tmp_path / "project"
    for rel, text in _LOGGING_PROJECT.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(textwrap.dedent(text).lstrip())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OTEL_", "STANDARDAGENTS_"))}
    env.update(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint)  # tracing on: the records carry trace ids
    port = _port()
    proc = subprocess.Popen([str(EXE), "serve", str(project), "--port", str(port), "--dev", "--log-format", "json",
                             "--database-url", f"sqlite:///{tmp_path / 'logs.db'}"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    started = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # up to the line saying the server is listening
            started.append(line)
            if "Uvicorn running on" in line:
                break
        with httpx.Client(base_url=f"http://127.0.0.1:{port}/api", timeout=30) as client:
            thread = client.post("/threads", json={"agent": "helper"}).json()
            done = client.post(f"/threads/{thread['id']}/messages?wait=true", json={"content": "note hello"}).json()
            execution = client.get(f"/executions/{done['executionId']}").json()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=30)
    records = _json_lines("".join(started) + stderr, "stderr")
    assert _json_lines(stdout, "stdout") == []
    assert [r["message"] for r in records if r["logger"] == "standardagents.server"] == [
        f"standardagents serving {project} on http://127.0.0.1:{port}/ (API under /api)"]
    (noted,) = [r for r in records if r["logger"] == "mytool"]
    assert {k: noted[k] for k in ("level", "message", "thread_id", "execution_id", "trace_id")} == {
        "level": "info", "message": "noted note hello", "thread_id": thread["id"], "execution_id": done["executionId"],
        "trace_id": execution["traceId"]}
