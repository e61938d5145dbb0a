"""The python blocks of docs/memory.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs" / "memory.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)


def test_the_page_has_its_two_examples() -> None:
    assert len(BLOCKS) == 2


@pytest.mark.parametrize("block", BLOCKS, ids=["agent", "store"])
def test_each_python_block_of_the_memory_page_runs(block: str) -> None:
    exec(compile(block, str(DOCS), "exec"), {"__name__": "docs_memory"})
