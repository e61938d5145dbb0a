"""Ids: 128 random bits each, unique across threads and across a fork."""

from __future__ import annotations

import os
import re
import threading

from standardagents.records import new_id


def test_ids_are_the_prefix_and_32_hex_digits_and_never_repeat() -> None:
    ids = [new_id("msg_") for _ in range(5000)]  # several pools of random bytes
    assert all(re.fullmatch(r"msg_[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_threads_taking_ids_at_once_never_get_the_same_one() -> None:
    taken: list[list[str]] = [[] for _ in range(4)]
    start = threading.Barrier(4)

    def take(mine: list[str]) -> None:
        start.wait()
        mine.extend(new_id() for _ in range(20000))

    workers = [threading.Thread(target=take, args=(mine,)) for mine in taken]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    every = [i for mine in taken for i in mine]
    assert len(set(every)) == len(every) == 80000


def test_a_forked_child_does_not_repeat_its_parents_next_ids() -> None:
    new_id()  # the parent holds a pool with ids left in it
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, ",".join(new_id() for _ in range(10)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split(","))
    parent = {new_id() for _ in range(10)}
    assert len(child) == 10 and not child & parent
