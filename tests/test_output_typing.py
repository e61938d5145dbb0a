"""Typed results under mypy: ``rt.run(..., output_type=X)`` gives ``ExecutionResult[X]``."""

from __future__ import annotations

import textwrap
from pathlib import Path

from mypy_run import own_lines, run_mypy

SNIPPET = '''
from pydantic import BaseModel
from standardagents import ExecutionResult, Runtime

class Invoice(BaseModel):
    total: float

async def typed(rt: Runtime) -> None:
    result = await rt.run("clerk", "bill", output_type=Invoice)
    reveal_type(result)
    reveal_type(result.value)
    sent = await rt.send("thr_1", "again", output_type=Invoice)
    reveal_type(sent.value)
    untyped = await rt.run("clerk", "hi")
    reveal_type(untyped.value)
    total: float = result.value.total
    wrong: str = result.value

def bare(result: ExecutionResult) -> None:
    reveal_type(result.value)
'''


def test_mypy_sees_the_value_of_a_typed_run_as_the_output_type(tmp_path: Path) -> None:
    source = tmp_path / "typed_use.py"
    source.write_text(textwrap.dedent(SNIPPET))
    out, status = run_mypy(tmp_path, source.name)
    lines = own_lines(out, source.name)
    assert 'note: Revealed type is "standardagents.engine.results.ExecutionResult[typed_use.Invoice]"' in lines, out
    assert lines.count('note: Revealed type is "typed_use.Invoice"') == 2, out
    assert lines.count('note: Revealed type is "Any"') == 2, out
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and 'has type "Invoice", variable has type "str"' in errors[0], out
    assert status == 1, out
