"""``standardagents threads``: a project's threads and what happened inside each turn.

``list`` prints a table of threads with their spend; ``show`` prints a thread's executions as
a tree of steps (each model call with its tokens, cost and timing, and the tool calls it
asked for), read from the same records the HTTP API serves.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from .effects_cli import DbOpt, _when, _with_runtime
from .turn_view import short_arguments

__all__ = ["threads_app"]

threads_app = typer.Typer(name="threads", help="List threads and show the steps of their turns.", no_args_is_help=True,
                          add_completion=False, pretty_exceptions_enable=False)
out = Console(highlight=False, soft_wrap=True)

ProjectOpt = Annotated[Path, typer.Option("--project", "-p", help="The project folder (the one holding agents/).")]


def _cost(value: float | None) -> str:
    return "-" if value is None else f"${value:.6f}"


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"


def _tokens(usage: dict[str, Any] | None) -> str:
    if not usage:
        return "-"
    return f"{usage.get('prompt_tokens', 0)} in / {usage.get('completion_tokens', 0)} out"


def _state(records: list[Any]) -> str:
    """A thread's state in a word or two: its newest turn's, or that it waits for a person."""
    waiting = sum(len([p for p in r.state.get("pending") or () if p.get("id") not in (r.state.get("decisions") or {})])
                  for r in records if r.status == "waiting")
    if waiting:
        return f"waiting for approval ({waiting})" if waiting > 1 else "waiting for approval"
    if any(r.status == "running" for r in records):
        return "running"
    if not records:
        return "new"
    newest = max(records, key=lambda r: r.created_at)
    outcome = newest.state.get("outcome")
    return str(outcome if outcome and outcome != "response" else newest.stop_reason or newest.status)


@threads_app.command("list")
def list_command(
    project: ProjectOpt = Path("."),
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent's threads.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many threads, newest first.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    database_url: DbOpt = None,
) -> None:
    """List threads, newest first, with their state (a turn waiting for approval says so),
    turns, tokens and cost; a subagent's threads are listed under the thread that started them."""

    async def row(rt: Any, t: Any, depth: int) -> dict[str, Any]:
        records = await rt.store.list_executions(thread_id=t.id)
        tokens = sum(int((r.state.get("usage") or {}).get("total_tokens", 0)) for r in records)
        costs = [r.state["cost"] for r in records if r.state.get("cost") is not None]
        children = []
        if depth < 8:
            for child in reversed(await rt.store.list_threads(parent_id=t.id, limit=1000)):
                children.append(await row(rt, child, depth + 1))
        return {"id": t.id, "agent": t.agent, "title": t.title, "parentId": t.parent_id, "state": _state(records),
                "executions": len(records), "tokens": tokens, "cost": sum(costs) if costs else None,
                "updatedAt": t.updated_at, "children": children}

    async def body(rt: Any) -> list[dict[str, Any]]:
        # a subagent's thread is shown under its parent (with --agent, threads of that agent
        # are listed wherever they are)
        found = await rt.store.list_threads(agent=agent, limit=limit, top_level=agent is None)
        return [await row(rt, t, 0) for t in found]

    rows = _with_runtime(project, database_url, body)
    if as_json:
        out.print_json(json.dumps(rows))
        return
    if not rows:
        out.print("No threads.")
        return
    table = Table("thread", "agent", "title", "state", "turns", "tokens", "cost", "updated")
    table.columns[0].no_wrap = True
    table.columns[3].no_wrap = True

    def add(r: dict[str, Any], depth: int) -> None:
        indent = "  " * (depth - 1) + "└ " if depth else ""
        state = r["state"]
        shown = f"[yellow]{escape(state)}[/]" if state.startswith("waiting") else escape(state)
        table.add_row(indent + r["id"], escape(r["agent"]), escape(r["title"] or ""), shown, str(r["executions"]),
                      str(r["tokens"]), _cost(r["cost"]), _when(r["updatedAt"]))
        for child in r["children"]:
            add(child, depth + 1)

    for r in rows:
        add(r, 0)
    out.print(table)


_OUTCOME_STYLE = {"ok": "green", "changed": "cyan", "error": "red"}


def _checks(node: Any, hooks: list[dict[str, Any]], guardrails: list[dict[str, Any]]) -> None:
    """The hooks and guardrails that ran for a step, one line each."""
    for hook in hooks:
        style = _OUTCOME_STYLE.get(str(hook.get("outcome")), "white")
        line = (f"hook {escape(str(hook.get('name')))} ({hook.get('event')})  [{style}]{hook.get('outcome')}[/]  "
                f"{_ms(hook.get('durationMs'))}")
        if hook.get("error"):
            line += f"  {escape(str(hook['error']))}"
        node.add(line)
    for guard in guardrails:
        verdict = "[red]tripped[/]" if guard.get("tripped") else "[green]passed[/]"
        node.add(f"guardrail {escape(str(guard.get('name')))} ({guard.get('kind')})  {verdict}")


@threads_app.command("show")
def show_command(
    thread_id: Annotated[str, typer.Argument(help="The thread's id, or the start of it (threads list shows them).")],
    project: ProjectOpt = Path("."),
    as_json: Annotated[bool, typer.Option("--json", help="Print the executions with their steps as JSON.")] = False,
    database_url: DbOpt = None,
) -> None:
    """Show a thread's turns as a tree of steps: model calls with tokens, cost and timing,
    the tool calls each asked for (with the decision on each that needed approval, and the
    calls still waiting for one), and the hooks and guardrails that ran for it."""
    from .engine.steps import execution_detail

    async def body(rt: Any) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]]]:
        thread = await rt.store.get_thread(thread_id)
        if thread is None:
            thread = await _by_prefix(rt, thread_id)
        records = sorted(await rt.store.list_executions(thread_id=thread.id), key=lambda r: r.created_at)
        # the thread is read once for all its turns
        messages = await rt.store.list_messages(thread.id)
        rows = await rt.store.list_tool_results(thread.id)
        links = await rt.store.list_subagents(thread.id)
        pending = await rt.pending_approvals(thread.id)
        return thread, [execution_detail(r, messages, rows, links) for r in records], pending

    thread, executions, pending = _with_runtime(project, database_url, body)
    tokens = {(p["executionId"], p["id"]): p["token"] for p in pending}
    if as_json:
        out.print_json(json.dumps({"id": thread.id, "agent": thread.agent, "title": thread.title,
                                   "executions": executions}, default=str))
        return
    root = Tree(f"[bold]{thread.id}[/]  {thread.agent}" + (f"  {thread.title}" if thread.title else ""))
    commands: list[tuple[str, str]] = []
    if not executions:
        root.add("no turns yet")
    for ex in executions:
        node = root.add(f"[bold]{ex['id']}[/]  {ex['outcome'] or ex['status']}  {len(ex['steps'])} steps  "
                        f"{_tokens(ex['usage'])}  {_cost(ex['cost'])}  {_ms(ex['durationMs'])}"
                        + (f"  trace {ex['traceId']}" if ex.get("traceId") else ""))
        for step in ex["steps"]:
            label = (f"model {step['model'] or '?'} ({step['provider'] or '?'})  {step['finishReason'] or '-'}  "
                     f"{_tokens(step['usage'])}  {_cost(step['cost'])}  latency {_ms(step['latencyMs'])}")
            if step.get("ttftMs") is not None:
                label += f"  first token {_ms(step['ttftMs'])}"
            snode = node.add(label)
            for attempt in step["attempts"]:
                snode.add(f"[yellow]failed[/] {attempt['model']}: {attempt['error']}")
            for call in step["toolCalls"]:
                repaired = "  repaired" if call["repaired"] else ""
                line = (f"tool {escape(call['name'])}  {call['status'] or 'no result'}  {_ms(call['durationMs'])}"
                        f"{repaired}{_decision(call.get('approval'))}")
                if call.get("subagent"):
                    child = call["subagent"]
                    line += f"  subagent {child['threadId']} ({escape(str(child['agent']))}, {child['status']})"
                snode.add(line)
            _checks(snode, step.get("hooks") or [], step.get("guardrails") or [])
        checks = ex.get("checks") or {}
        _checks(node, checks.get("hooks") or [], checks.get("guardrails") or [])
        for error in ex["errors"]:
            node.add(f"[red]error[/] {error['code']}: {error['message']}")
        for call in ex.get("waitingForApproval") or ():
            shown = f"{call['name']}({short_arguments(call.get('arguments'))})"
            node.add(f"[yellow]waiting for approval[/]: {escape(shown)}")
            token = tokens.get((ex["id"], call["id"]))
            if token is not None:
                commands.append((shown, f"standardagents approve {shlex.quote(str(project))} {token}"))
    out.print(root)
    for shown, command in commands:  # whole lines, never cut to the terminal's width
        out.print(f"{escape(shown)} waits for approval:\n  approve: {escape(command)}\n  deny:    "
                  f"{escape(command)} --deny", soft_wrap=True)


def _decision(approval: Any) -> str:
    """How a call that needed approval was decided, for its line."""
    if not isinstance(approval, dict):
        return ""
    reason = f" ({escape(str(approval['reason']))})" if approval.get("reason") else ""
    return f"  [green]approved[/]{reason}" if approval.get("approved") else f"  [red]denied[/]{reason}"


async def _by_prefix(rt: Any, prefix: str) -> Any:
    """The one thread whose id starts with ``prefix``; an error names none or the several."""
    from .exceptions import StandardAgentsError

    matches = [t for t in await rt.store.list_threads(limit=100_000) if t.id.startswith(prefix)] if prefix else []
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise StandardAgentsError(f"unknown thread {prefix!r} (threads list shows them)")
    raise StandardAgentsError(f"{prefix!r} starts {len(matches)} thread ids ({', '.join(t.id for t in matches[:5])}"
                              f"{', ...' if len(matches) > 5 else ''}); give more of the id")
