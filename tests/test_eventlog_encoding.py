"""The event log's batches read back as the values the standard library's JSON would give."""

from __future__ import annotations

import dataclasses
import datetime
import json
from typing import Any

import pytest

from standardagents.eventlog import batch_rows
from standardagents.events import Event


@dataclasses.dataclass
class _Point:
    x: int


DATA: list[dict[str, Any]] = [
    {"text": "caf\u00e9 \U0001f600 \x7f \x00", "n": 1, "f": 1.5e-05, "big": 1e16, "none": None},
    {"when": datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.UTC), "point": _Point(2)},
    {"huge": 2**70},
    {1: "an integer key", "nested": {2.5: "a float key"}},
]


@pytest.mark.parametrize("data", DATA, ids=range(len(DATA)))
def test_a_batch_reads_back_as_the_standard_librarys_json_would(data: dict[str, Any]) -> None:
    events = [Event("log", "thr_1", data, id=5, ts=1.25), Event("log", "thr_1", {"n": 2}, id=6, ts=1.5)]
    [(stream, last, first, count, text, ts)] = batch_rows([("thr_1", e) for e in events])
    expected = json.dumps([[e.id, e.type, e.data, e.ts] for e in events], default=str)
    assert (stream, last, first, count, ts) == ("thr_1", 6, 5, 2, 1.5)
    assert json.loads(text) == json.loads(expected)
