"""Event ids on one bus: they grow on every thread, above ids relayed from other workers too,
and events published while a thread's event is held reach subscribers after it, in order.
With a sequencer (as a relay installs), a thread's events reach subscribers in id order and
only up to the lowest frontier the other workers announced."""

from __future__ import annotations

import time

from standardagents.events import Event, EventBus, Sequencer


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


def _sequenced() -> tuple[EventBus, Sequencer]:
    bus = EventBus()
    sequencer = Sequencer(bus, bus._deliver)
    bus.sequencer = sequencer
    return bus, sequencer


def test_a_local_event_waits_until_every_peer_announced_a_frontier_above_it() -> None:
    bus, sequencer = _sequenced()
    sequencer.heard("peer", 10, {}, now=0.0)
    with bus.subscribe("t1") as sub:
        bus.emit("message_chunk", "t1", {"n": 1})
        assert sub.queue.empty()
        sequencer.heard("peer", bus.frontier(), {}, now=1.0)
        assert sub.queue.get_nowait().data == {"n": 1}


def test_a_peer_event_with_a_lower_id_arriving_later_is_delivered_before_the_local_one() -> None:
    bus, sequencer = _sequenced()
    sequencer.heard("peer", 10, {}, now=0.0)
    with bus.subscribe("t1") as sub:
        bus.emit("message_queued", "t1", {})
        local_id = bus._last
        bus.publish(Event("message_created", "t1", {}, local_id - 5, local=False))
        sequencer.heard("peer", local_id, {}, now=1.0)
        got = [sub.queue.get_nowait() for _ in range(2)]
    assert [(e.type, e.id) for e in got] == [("message_created", local_id - 5), ("message_queued", local_id)]


def test_a_peer_holding_an_id_of_a_thread_keeps_that_thread_back_only() -> None:
    bus, sequencer = _sequenced()
    sequencer.heard("peer", 1000, {"t1": 500}, now=0.0)
    with bus.subscribe("t1") as one, bus.subscribe("t2") as two:
        bus.publish(Event("message_chunk", "t1", {}, 600, local=False))
        bus.publish(Event("message_chunk", "t2", {}, 601, local=False))
        assert one.queue.empty()
        assert two.queue.get_nowait().id == 601
        sequencer.heard("peer", 1000, {}, now=1.0)
        assert one.queue.get_nowait().id == 600


def test_a_forgotten_peer_no_longer_holds_events_back() -> None:
    bus, sequencer = _sequenced()
    sequencer.heard("peer", 10, {}, now=0.0, session=42)
    with bus.subscribe("t1") as sub:
        bus.emit("message_chunk", "t1", {})
        assert sequencer.silent(since=5.0) == {"peer": 42}
        sequencer.forget(["peer"])
        assert sub.queue.get_nowait().type == "message_chunk"
    assert not sequencer.blocked


def test_ids_stay_above_a_frontier_a_peer_announced() -> None:
    bus, sequencer = _sequenced()
    ahead = time.time_ns() // 1000 + 3_600_000_000
    sequencer.heard("peer", ahead, {}, now=0.0)
    assert bus.next_id("t1") == ahead + 1


def test_the_settled_id_of_a_thread_is_where_a_replay_stops() -> None:
    bus, sequencer = _sequenced()
    assert bus.settled("t1") > time.time_ns() // 1000 * 1000  # no peer: everything is settled
    sequencer.heard("peer", 500, {"t1": 300}, now=0.0)
    assert (bus.settled("t1"), bus.settled("t2")) == (299, 500)
    held = bus.hold("t2")
    assert bus.settled("t2") == min(500, held - 1)
