"""The example of docs/models.md ("Long threads: compaction"), run in a turn on a thread a
compaction folded: the turn holds the summary and what it kept, the thread keeps everything."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from engine_helpers import stub_model
from standardagents import define_agent, define_prompt
from standardagents.records import Message
from standardagents.testing.openai_stub import StubReply
from standardagents.toolcalls import SUMMARY_PREFIX

DOCS = Path(__file__).resolve().parents[1] / "docs" / "models.md"


def docs_block(first_line: str) -> str:
    found = re.search(r"```python\n(" + re.escape(first_line) + r"\n.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert found, f"docs/models.md shows {first_line}"
    return found[1]


async def test_the_documented_tool_counts_the_turns_messages_and_the_threads(stub, make_runtime):
    namespace: dict[str, Any] = {}
    exec(compile(docs_block("# history_sizes.py"), "history_sizes.py", "exec"), namespace)
    tool = namespace["history_sizes"]
    stub.queue(StubReply(tool_calls=[("history_sizes", "{}")]), "done")
    rt = await make_runtime(define_agent(name="helper", side_a={"prompt": "main"}),
                            define_prompt(name="main", prompt="x", tools=["history_sizes"], compaction_threshold=0.8),
                            tool, stub_model(stub, context_window=100_000))
    thread = await rt.create_thread("helper")
    folded = [Message(thread_id=thread.id, role="user", content=f"old {i}", hidden=True) for i in range(40)]
    kept = Message(thread_id=thread.id, role="user", content="kept")
    summary = Message(thread_id=thread.id, role="user", content=f"{SUMMARY_PREFIX}\nearlier",
                      metadata={"summary": True, "insertBefore": kept.id})
    await rt.store.commit_step(messages=[*folded, kept, summary])
    await rt.send(thread.id, "how long?")
    (result,) = [m for m in await rt.store.list_messages(thread.id) if m.role == "tool"]
    # the summary, the kept message, the question and the reply calling the tool
    assert json.loads(result.content or "") == {"turn": 4, "thread": 44}
