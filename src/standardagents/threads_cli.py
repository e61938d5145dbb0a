"""``standardagents threads``: a project's threads and what happened inside each turn.

``list`` prints a table of threads with their spend; ``show`` prints a thread's executions as
a tree of steps (each model call with its tokens, cost and timing, and the tool calls it
asked for), read from the same records the HTTP API serves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from .effects_cli import DbOpt, _when, _with_runtime

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


@threads_app.command("list")
def list_command(
    project: ProjectOpt = Path("."),
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent's threads.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many threads, newest first.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    database_url: DbOpt = None,
) -> None:
    """List threads, newest first, with their executions, tokens and cost."""

    async def body(rt: Any) -> list[dict[str, Any]]:
        rows = []
        for t in await rt.store.list_threads(agent=agent, limit=limit):
            records = await rt.store.list_executions(thread_id=t.id)
            tokens = sum(int((r.state.get("usage") or {}).get("total_tokens", 0)) for r in records)
            costs = [r.state["cost"] for r in records if r.state.get("cost") is not None]
            rows.append({"id": t.id, "agent": t.agent, "title": t.title, "executions": len(records),
                         "tokens": tokens, "cost": sum(costs) if costs else None, "updatedAt": t.updated_at})
        return rows

    rows = _with_runtime(project, database_url, body)
    if as_json:
        out.print_json(json.dumps(rows))
        return
    if not rows:
        out.print("No threads.")
        return
    table = Table("thread", "agent", "title", "turns", "tokens", "cost", "updated")
    for r in rows:
        table.add_row(r["id"], r["agent"], r["title"] or "", str(r["executions"]), str(r["tokens"]), _cost(r["cost"]),
                      _when(r["updatedAt"]))
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
    thread_id: Annotated[str, typer.Argument(help="The thread's id (threads list shows them).")],
    project: ProjectOpt = Path("."),
    as_json: Annotated[bool, typer.Option("--json", help="Print the executions with their steps as JSON.")] = False,
    database_url: DbOpt = None,
) -> None:
    """Show a thread's turns as a tree of steps: model calls with tokens, cost and timing,
    the tool calls each asked for, and the hooks and guardrails that ran for it."""
    from .engine.steps import execution_detail
    from .exceptions import StandardAgentsError

    async def body(rt: Any) -> tuple[Any, list[dict[str, Any]]]:
        thread = await rt.store.get_thread(thread_id)
        if thread is None:
            raise StandardAgentsError(f"unknown thread {thread_id!r} (threads list shows them)")
        records = sorted(await rt.store.list_executions(thread_id=thread_id), key=lambda r: r.created_at)
        # the thread is read once for all its turns
        messages = await rt.store.list_messages(thread_id)
        rows = await rt.store.list_tool_results(thread_id)
        links = await rt.store.list_subagents(thread_id)
        return thread, [execution_detail(r, messages, rows, links) for r in records]

    thread, executions = _with_runtime(project, database_url, body)
    if as_json:
        out.print_json(json.dumps({"id": thread.id, "agent": thread.agent, "title": thread.title,
                                   "executions": executions}, default=str))
        return
    root = Tree(f"[bold]{thread.id}[/]  {thread.agent}" + (f"  {thread.title}" if thread.title else ""))
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
                snode.add(f"tool {call['name']}  {call['status'] or 'no result'}  {_ms(call['durationMs'])}{repaired}")
            _checks(snode, step.get("hooks") or [], step.get("guardrails") or [])
        checks = ex.get("checks") or {}
        _checks(node, checks.get("hooks") or [], checks.get("guardrails") or [])
        for error in ex["errors"]:
            node.add(f"[red]error[/] {error['code']}: {error['message']}")
    out.print(root)
