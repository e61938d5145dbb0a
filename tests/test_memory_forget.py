"""Forgetting a user on SQLite and PostgreSQL: after ``forget_user`` no table holds a row that
names the user or one of their threads (the account and its tokens aside), and other users'
rows are all still there."""

from __future__ import annotations

from typing import Any

from standardagents import Runtime, define_agent, define_model, define_prompt
from standardagents.forget import forget_user
from standardagents.memory.agents import memory_for
from standardagents.project import build_registry
from standardagents.store.schema import metadata
from store_fixtures import Backend


def _registry() -> Any:
    return build_registry(
        define_model(name="default", provider="test", model="offline"),
        define_prompt(name="p", prompt="You help.", model="default"),
        define_agent(name="helper", side_a={"prompt": "p", "stop_on_response": True}, memory={}),
    )


def _text(value: Any) -> str:
    if isinstance(value, memoryview):
        value = bytes(value)
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


async def _rows_naming(backend: Backend, needles: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for table in metadata.sorted_tables:
        for row in await backend.fetch(f'SELECT * FROM "{table.name}"'):
            text = " ".join(_text(v) for v in row)
            if any(n in text for n in needles):
                out[table.name] = out.get(table.name, 0) + 1
    return out


async def test_forgetting_a_user_leaves_no_row_of_theirs_in_any_table(backend: Backend) -> None:
    rt = await Runtime.open(_registry(), store=backend.new_store())
    try:
        users = {}
        for name in ("alice", "bob"):
            user = await rt.store.create_user(name)
            result = await rt.run("helper", f"Hello, I am {name}", user_id=user.id)
            await rt.run("helper", "What time is it?", user_id=user.id)
            await (await memory_for(rt)).put(("user", user.id, "memories"), "k", {"text": f"{name} likes tea"})
            await rt.store.set_user_value(user.id, "theme", "dark")
            await rt.store.write_file(result.thread_id, "notes.txt", b"private")
            threads = [t.id for t in await rt.store.list_threads(user_id=user.id)]
            users[name] = (user.id, threads)
        alice, alice_threads = users["alice"]
        bob, bob_threads = users["bob"]
        report = await forget_user(rt.store, alice, runtime=rt)
        assert sorted(report.threads) == sorted(alice_threads)
        assert (report.removed["threads"], report.removed["memory_items"], report.removed["memory_vectors"],
                report.removed["user_values"], report.removed["thread_files"]) == (2, 1, 1, 1, 1)
        assert await _rows_naming(backend, [alice, *alice_threads]) == {"users": 1}
        left = await _rows_naming(backend, [bob, *bob_threads])
        assert (left["threads"], left["memory_items"], left["user_values"], left["thread_files"]) == (2, 1, 1, 1)
        assert left["messages"] >= 4
    finally:
        await rt.aclose()
