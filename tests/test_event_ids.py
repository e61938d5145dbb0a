"""Event ids on one bus: they grow on every thread, above ids relayed from other workers too,
and events published while a thread's event is held reach subscribers after it, in order."""

from __future__ import annotations

import time

from standardagents.events import Event, EventBus


def test_ids_stay_above_an_id_relayed_from_a_worker_whose_clock_is_ahead() -> None:
    bus = EventBus()
    with bus.subscribe() as sub:
        ahead = time.time_ns() // 1000 + 3_600_000_000  # an hour ahead of this clock
        bus.publish(Event("message_chunk", "t1", {}, ahead, local=False))
        bus.emit("message_chunk", "t1", {})
        bus.emit("message_chunk", "t2", {})
        ids = [sub.queue.get_nowait().id for _ in range(3)]
    assert ids[0] == ahead
    assert ahead < ids[1] < ids[2]


def test_events_published_while_one_is_held_follow_it_in_id_order() -> None:
    bus = EventBus()
    with bus.subscribe("t1") as sub:
        held_id = bus.hold("t1")
        bus.emit("message_chunk", "t1", {"n": 1})
        bus.emit("message_chunk", "t1", {"n": 2})
        assert sub.queue.empty()
        bus.release("t1", Event("done", "t1", {}, held_id))
        got = [sub.queue.get_nowait() for _ in range(3)]
    assert [e.type for e in got] == ["done", "message_chunk", "message_chunk"]
    assert [e.id for e in got] == sorted(e.id for e in got)
    assert got[0].id == held_id


def test_two_overlapping_holds_of_a_thread_reach_subscribers_in_id_order() -> None:
    bus = EventBus()
    with bus.subscribe("t1") as sub:
        first = bus.hold("t1")
        bus.emit("message_chunk", "t1", {"n": 1})
        second = bus.hold("t1")
        bus.emit("message_chunk", "t1", {"n": 2})
        bus.release("t1", Event("done", "t1", {"of": "first"}, first))
        assert sub.queue.empty()  # the second held event's lower id is not overtaken yet
        bus.release("t1", Event("done", "t1", {"of": "second"}, second))
        got = [sub.queue.get_nowait() for _ in range(4)]
        assert sub.queue.empty()
        bus.emit("message_chunk", "t1", {"n": 3})
        assert sub.queue.get_nowait().id > got[-1].id  # nothing is held any more
    assert [(e.type, e.data) for e in got] == [("done", {"of": "first"}), ("message_chunk", {"n": 1}),
                                               ("done", {"of": "second"}), ("message_chunk", {"n": 2})]
    assert [e.id for e in got] == sorted(e.id for e in got)


def test_a_held_event_that_is_not_published_still_lets_the_waiting_ones_through() -> None:
    bus = EventBus()
    with bus.subscribe("t1") as sub:
        bus.hold("t1")
        bus.emit("message_chunk", "t1", {"n": 1})
        bus.release("t1", None)
        assert sub.queue.get_nowait().data == {"n": 1}
        bus.emit("message_chunk", "t1", {"n": 2})
        assert sub.queue.get_nowait().data == {"n": 2}
