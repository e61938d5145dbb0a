"""The API against its own OpenAPI document, fuzzed by schemathesis on a real server (SQLite and
PostgreSQL): valid and invalid requests to every operation get no 5xx and no status the
document does not list.

``STANDARDAGENTS_FUZZ_EXAMPLES`` sets the examples per operation and mode (a bigger run by
hand: ``STANDARDAGENTS_FUZZ_EXAMPLES=500 pytest tests/test_server_openapi_fuzz.py``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from server_fixtures import LiveServer, serve_app
from store_fixtures import Backend

EXAMPLES = int(os.environ.get("STANDARDAGENTS_FUZZ_EXAMPLES", "6"))
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
#: streams never end by themselves; they are covered by the stream tests
ENDLESS = ("/stream", "/ws")


@pytest.fixture
def fuzz_server(project_dir: Path, backend: Backend) -> Iterator[LiveServer]:
    """The server on each database (a PostgreSQL schema of its own)."""
    yield from serve_app(project_dir, backend.url, schema=backend.schema)


def _fuzz(operation: Any, mode: GenerationMode, base_url: str, headers: dict[str, str], calls: list[int]) -> None:
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, database=None, phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck))
    def run(case: Any) -> None:
        calls.append(1)
        case.call_and_validate(base_url=base_url, headers=headers, checks=CHECKS, timeout=30)

    run()


def test_fuzzed_requests_get_only_documented_statuses_and_no_5xx(fuzz_server: LiveServer) -> None:
    schema = schemathesis.openapi.from_url(f"{fuzz_server.base_url}/api/openapi.json")
    document = httpx.get(f"{fuzz_server.base_url}/api/openapi.json").json()
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 20
    calls: list[int] = []
    for operation in operations:
        if operation.path.endswith(ENDLESS):
            continue
        raw = document["paths"][operation.path][operation.method.lower()]
        # an operation with no parameters, no body and no token to spoil has no invalid form
        negatable = bool(raw.get("parameters") or raw.get("requestBody") or raw.get("security") != [])
        modes = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE) if negatable else (GenerationMode.POSITIVE,)
        for mode in modes:
            _fuzz(operation, mode, fuzz_server.base_url, fuzz_server.headers, calls)
    print(f"schemathesis: {len(calls)} requests over {len(operations)} operations")
    assert len(calls) > len(operations)
