"""SSE frames: the bytes a stream sends for an event, and a turn's events sent in batches."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
from typing import Any

import pytest

from standardagents.events import Event, EventBus
from standardagents.server.streams import event_json, sse_encode, turn_batches


@dataclasses.dataclass
class _Point:
    x: int


PAYLOADS: list[Any] = [
    {"text": "plain", "n": 3, "ok": True, "none": None, "list": [1, 2.5, "x"]},
    {"text": "caf\u00e9 \u65e5\u672c \U0001f600"},
    {"text": "del \x7f and control \x00\x1f\n\t\"quote\" \\ /slash"},
    {"small": 1.5e-05, "tiny": 1e-7, "big": 1e16, "bigger": 1.7976931348623157e308, "neg": -0.0},
    {"edge": 0.0001, "just_below": 9.99e-05, "third": 0.30000000000000004},
    {"when": datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.UTC), "day": datetime.date(2024, 5, 1)},
    {"huge": 2**70, "negative_huge": -(2**65)},
    {1: "int key", "s": {2.5: "float key", None: "none key", True: "bool key"}},
    {"point": _Point(1)},
    {"text": "a string that looks like a number :1e5 or ,0.00001"},
    {"deep": [[[[{"a": [1, {"b": "\u00fc"}]}]]]]},
]


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
def test_event_json_is_byte_for_byte_what_json_dumps_gives(payload: Any) -> None:
    assert event_json(payload) == json.dumps(payload, separators=(",", ":"), default=str).encode()


def test_a_published_events_frame_has_its_id_type_and_data() -> None:
    event = Event("message_chunk", "thr_1", {"delta": "h\u00e9"}, id=42, ts=1.5)
    assert sse_encode(event) == (b'id: 42\nevent: message_chunk\ndata: {"id":42,"type":"message_chunk",'
                                 b'"threadId":"thr_1","data":{"delta":"h\\u00e9"},"ts":1.5}\n\n')


def test_an_event_made_for_one_client_has_no_id_line() -> None:
    event = Event("connected", "thr_1", {"threadId": "thr_1"}, ts=2.0)
    assert sse_encode(event) == (b'event: connected\ndata: {"id":0,"type":"connected","threadId":"thr_1",'
                                 b'"data":{"threadId":"thr_1"},"ts":2.0}\n\n')


def test_two_events_of_equal_content_keep_their_own_frames() -> None:
    first = Event("log", "thr_1", {"n": 1}, id=7, ts=1.0)
    second = Event("log", "thr_1", {"n": 2}, id=8, ts=1.0)
    assert b"id: 7\n" in sse_encode(first) and b'"n":1' in sse_encode(first)
    assert b"id: 8\n" in sse_encode(second) and b'"n":2' in sse_encode(second)


async def _batches(bus: EventBus, sub: Any, task: asyncio.Task[Any], execution_id: str | None) -> list[list[str]]:
    return [[e.type for e in batch] async for batch in turn_batches(sub, task, None, "thr_1", execution_id)]


async def test_events_waiting_together_come_in_one_batch_ending_at_the_executions_done() -> None:
    bus = EventBus()
    sub = bus.subscribe("thr_1")
    running = asyncio.get_running_loop().create_task(asyncio.Event().wait())
    try:
        bus.emit("execution_started", "thr_1", {"executionId": "exe_1"})
        bus.emit("message_chunk", "thr_1", {"executionId": "exe_1", "delta": "hi"})
        bus.emit("done", "thr_1", {"executionId": "exe_1"})
        bus.emit("execution_started", "thr_1", {"executionId": "exe_2"})
        assert await _batches(bus, sub, running, "exe_1") == [["execution_started", "message_chunk", "done"]]
    finally:
        running.cancel()
    assert not bus.has_subscribers("thr_1")


async def test_an_event_arriving_later_comes_in_a_batch_of_its_own() -> None:
    bus = EventBus()
    sub = bus.subscribe("thr_1")
    running = asyncio.get_running_loop().create_task(asyncio.Event().wait())
    bus.emit("execution_started", "thr_1", {"executionId": "exe_1"})
    batches = turn_batches(sub, running, None, "thr_1", "exe_1")
    try:
        first = await anext(batches)
        later = asyncio.ensure_future(anext(batches))
        bus.emit("done", "thr_1", {"executionId": "exe_1"})
        second = await asyncio.wait_for(later, 10)
        assert [e.type for e in first] == ["execution_started"]
        assert [e.type for e in second] == ["done"]
    finally:
        running.cancel()
        await batches.aclose()


async def test_events_left_when_the_execution_ended_are_sent_up_to_its_done() -> None:
    bus = EventBus()
    sub = bus.subscribe("thr_1")

    async def turn() -> None:
        bus.emit("message_chunk", "thr_1", {"executionId": "exe_1", "delta": "a"})
        bus.emit("done", "thr_1", {"executionId": "exe_1"})
        bus.emit("log", "thr_1", {"n": 1})

    ended = asyncio.get_running_loop().create_task(turn())
    await ended
    assert await _batches(bus, sub, ended, "exe_1") == [["message_chunk", "done"]]
