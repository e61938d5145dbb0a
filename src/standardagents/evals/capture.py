"""Capturing a stored turn as a case: its input, the history before it, the thread's small
text files, a cassette of what its model replied and its tools returned, and the original
reply as the reference (with the reply and the tool trajectory as the case's expectations).

The case is added to a dataset file (created for the thread's agent when missing), so
``standardagents eval`` replays it with the current code, prompt and model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from ..exceptions import NotFoundError, StandardAgentsError
from ..records import Message
from .datasets import DatasetError

__all__ = ["CaptureError", "capture_turn", "write_case"]

#: thread files larger than this are left out of a captured case
FILE_LIMIT = 64 * 1024


class _Dumper(yaml.SafeDumper):
    """Writes repeated values out in full (a dataset file is read by people, not anchors)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


class CaptureError(StandardAgentsError):
    """The turn cannot be captured (it has no user message or no reply)."""


def _history_entry(m: Message) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        entry["toolCalls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                              for c in m.tool_calls]
    if m.tool_call_id:
        entry["toolCallId"] = m.tool_call_id
    if m.name:
        entry["name"] = m.name
    return entry


def _arguments(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


async def capture_turn(store: Any, thread_id: str, execution_id: str | None = None, *,
                       name: str | None = None) -> dict[str, Any]:
    """The case (a plain mapping, as a dataset file holds it) of one stored turn: the given
    execution of the thread, else its latest finished one."""
    thread = await store.get_thread(thread_id)
    if thread is None:
        raise NotFoundError("thread", thread_id)
    executions = [e for e in await store.list_executions(thread_id=thread_id)
                  if execution_id is None or e.id == execution_id]
    if not executions:
        raise NotFoundError("execution", execution_id or f"any of thread {thread_id}")
    record = max(executions, key=lambda e: e.created_at) if execution_id is None else executions[0]
    messages = [m for m in await store.list_messages(thread_id) if not m.hidden]
    first = next((i for i, m in enumerate(messages) if (m.metadata or {}).get("executionId") == record.id), None)
    if first is None:
        raise CaptureError(f"execution {record.id} of thread {thread_id} has no stored reply")
    start = next((i for i in range(first - 1, -1, -1) if messages[i].role == "user"), None)
    if start is None:
        raise CaptureError(f"execution {record.id} of thread {thread_id} has no user message before its reply")
    replies = [m for m in messages[first:] if (m.metadata or {}).get("executionId") == record.id
               and m.role == "assistant" and not (m.metadata or {}).get("error") and not (m.metadata or {}).get("summary")]
    call_ids = {c.id for m in replies for c in m.tool_calls or ()}
    rows = {r["tool_call_id"]: r for r in await store.list_tool_results(thread_id) if r.get("tool_call_id") in call_ids}
    model = []
    tools = []
    trajectory = []
    for m in replies:
        model.append({"text": m.content or "", "reasoning": m.reasoning,
                      "toolCalls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls or ()],
                      "usage": m.usage.to_dict() if m.usage is not None else None})
        for c in m.tool_calls or ():
            row = rows.get(c.id) or {}
            args = _arguments(c.arguments)
            tools.append({"name": c.name, "arguments": args, "status": row.get("status") or "success",
                          "result": row.get("result"), "error": row.get("error")})
            trajectory.append({"name": c.name, "arguments": args if isinstance(args, dict) else None})
    state = record.state or {}
    reference = state.get("value") if state.get("value") is not None else (replies[-1].content if replies else None)
    files: dict[str, str] = {}
    for f in await store.list_files(thread_id):
        if f.size <= FILE_LIMIT:
            data = await store.read_file(thread_id, f.path)
            try:
                files[f.path] = (data or b"").decode("utf-8")
            except UnicodeDecodeError:
                continue
    expect: dict[str, Any] = {"tools": {"calls": trajectory, "order": "strict", "exact": True}}
    if isinstance(reference, str) and reference:
        expect["equals"] = reference
    case_input: dict[str, Any] = {"message": messages[start].content or ""}
    if start:
        case_input["history"] = [_history_entry(m) for m in messages[:start] if m.role in ("user", "assistant", "tool")]
    if files:
        case_input["files"] = files
    if thread.metadata:
        case_input["metadata"] = dict(thread.metadata)
    return {
        "name": name or f"{thread.agent}-{record.id.removeprefix('exe_')[:12]}",
        "agent": thread.agent,
        "input": case_input,
        "reference": reference,
        "expect": expect,
        "replay": {"model": model, "tools": tools, "unmatched": "run", "offline": True,
                   "source": {"threadId": thread_id, "executionId": record.id}},
    }


def write_case(path: str | Path, case: dict[str, Any]) -> None:
    """Add ``case`` to a dataset file (a case of the same name is replaced); a new file is
    made for the case's agent. JSONL files get one more line."""
    path = Path(path)
    if path.suffix == ".jsonl":
        new = not path.exists() or path.stat().st_size == 0
        with path.open("a", encoding="utf-8") as fh:
            if new:
                fh.write(json.dumps({"agent": case["agent"]}) + "\n")
            fh.write(json.dumps(case) + "\n")
        return
    data: dict[str, Any] = {"agent": case["agent"], "cases": []}
    if path.exists():
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise DatasetError(f"not valid YAML: {exc}", source=str(path)) from None
        if loaded is not None:
            if not isinstance(loaded, dict) or not isinstance(loaded.get("cases", []), list):
                raise DatasetError("a dataset is a mapping with 'agent' and 'cases'", source=str(path))
            data = loaded
            data.setdefault("cases", [])
    if data.get("agent") == case["agent"]:  # else the case keeps naming its own agent
        case = {k: v for k, v in case.items() if k != "agent"}
    data["cases"] = [c for c in data["cases"] if not (isinstance(c, dict) and c.get("name") == case["name"])]
    data["cases"].append(case)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100), encoding="utf-8")
    tmp.replace(path)
