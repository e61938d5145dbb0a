"""A turn asked for with one typed TurnRequest: Runtime.begin starts it and returns its Turn,
the keyword doors (start, send, submit, run) build the same request, and a bad or misspelt
option is refused before anything is stored (or, misspelt, by the type checker)."""

from __future__ import annotations

import dataclasses
import re
import textwrap
from pathlib import Path
from typing import Any, get_type_hints

import pytest

from mypy_run import own_lines, run_mypy
from standardagents import define_agent, define_model, define_prompt
from standardagents.engine import StartOptions, TurnRequest
from standardagents.engine.options import RunOptions
from standardagents.exceptions import StandardAgentsError


def _definitions() -> tuple[Any, ...]:
    return (define_agent(name="clerk", side_a={"prompt": "main"}),
            define_prompt(name="main", prompt="You answer briefly."),
            define_model(name="default", provider="test", model="offline"))


async def test_begin_runs_the_requested_turn_under_the_requested_execution_id(make_runtime: Any) -> None:
    rt = await make_runtime(*_definitions())
    thread = await rt.create_thread("clerk")
    turn = await rt.begin(thread.id, TurnRequest(content="hello there", execution_id="exe_chosen",
                                                 metadata={"from": "test"}))
    result = await turn
    assert (turn.id, result.execution_id, result.stop_reason) == ("exe_chosen", "exe_chosen", "complete")
    first = (await rt.store.list_messages(thread.id))[0]
    assert (first.role, first.content, first.metadata) == ("user", "hello there", {"from": "test"})
    assert await turn.status() == "complete"


async def test_begin_gives_a_turn_without_an_id_a_new_one(make_runtime: Any) -> None:
    rt = await make_runtime(*_definitions())
    thread = await rt.create_thread("clerk")
    turn = await rt.begin(thread.id, TurnRequest(content="hi"))
    result = await turn
    assert turn.id.startswith("exe_") and result.execution_id == turn.id


async def test_a_bad_option_of_a_request_is_refused_before_anything_is_stored(make_runtime: Any) -> None:
    rt = await make_runtime(*_definitions())
    thread = await rt.create_thread("clerk")
    with pytest.raises(StandardAgentsError, match="output_retries must be a whole number"):
        await rt.begin(thread.id, TurnRequest(content="hi", output_retries=-1))
    with pytest.raises(StandardAgentsError, match="unknown sampling settings"):
        await rt.start(thread.id, "hi", sampling={"temprature": 0.2})
    assert await rt.store.list_messages(thread.id) == []
    assert await rt.store.list_executions(thread_id=thread.id) == []


def test_the_keyword_options_are_the_fields_of_a_request() -> None:
    fields = {f.name for f in dataclasses.fields(TurnRequest)}
    assert set(get_type_hints(StartOptions)) == fields - {"content", "execution_id"}
    assert set(get_type_hints(RunOptions)) == fields - {"content", "execution_id", "output_type"}


SNIPPET = '''
from standardagents import Runtime
from standardagents.engine import TurnRequest

async def use(rt: Runtime) -> None:
    await rt.start("thr_1", "hi", usage_limit={"max_steps": 2})
    await rt.submit("thr_1", "hi", sampling={"temperature": 0.1}, silnet=True)
    await rt.send("thr_1", "hi", busy="enqueue", start_side="c")
    await rt.begin("thr_1", TurnRequest(contnet="hi"))
    await rt.run("clerk", "hi", output_type=int, output_retries=2, model="default")
'''


def test_a_misspelt_or_mistyped_option_is_a_type_error(tmp_path: Path) -> None:
    source = tmp_path / "door_use.py"
    source.write_text(textwrap.dedent(SNIPPET))
    out, status = run_mypy(tmp_path, source.name)
    errors = [line for line in own_lines(out, source.name) if line.startswith("error:")]
    assert len(errors) == 4, out
    assert 'Unexpected keyword argument "usage_limit"' in errors[0], out
    assert 'Unexpected keyword argument "silnet"' in errors[1], out
    assert 'No overload variant of "send"' in errors[2], out
    assert 'Unexpected keyword argument "contnet"' in errors[3], out
    assert status == 1, out


DOCS = Path(__file__).resolve().parents[1] / "docs" / "turns.md"


async def test_the_docs_example_begins_a_turn_and_reads_its_answer(make_runtime: Any,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    found = re.search(r"```python\n(# begin a turn\n.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert found, "docs/turns.md shows how to begin a turn"
    namespace: dict[str, Any] = {}
    exec(compile(found[1], "docs/turns.md", "exec"), namespace)
    rt = await make_runtime(*_definitions())
    thread = await rt.create_thread("clerk")
    answer = await namespace["ask"](rt, thread.id)
    printed = capsys.readouterr().out.split()
    assert printed[0].startswith("exe_") and printed[1] in ("queued", "running")
    reply = (await rt.store.list_messages(thread.id))[-1]
    assert (reply.role, reply.content) == ("assistant", answer)
    assert answer.startswith("Test reply to: What is 12 * 7?")
    execution = (await rt.store.list_executions(thread_id=thread.id))[0]
    assert (execution.id, execution.status) == (printed[0], "complete")
