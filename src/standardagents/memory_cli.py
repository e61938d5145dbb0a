"""``standardagents memory``: browse, search, edit, export and import long-term memory, re-embed
it after a change of embedder, and forget a user everywhere.

It opens the project's database (or ``--database-url``) directly: no server needs to run.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from .exceptions import StandardAgentsError

__all__ = ["memory_app"]

memory_app = typer.Typer(name="memory", help="Browse, search, edit, export and forget long-term memory.",
                         no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)
T = TypeVar("T")

ProjectOpt = Annotated[Path, typer.Option("--project", "-p", help="The project folder (its database is used).")]
DbOpt = Annotated[str | None, typer.Option("--database-url", envvar="STANDARDAGENTS_DATABASE_URL",
                                           help="SQLAlchemy URL; default: SQLite under the project's .standardagents/.")]
EmbedderOpt = Annotated[str, typer.Option("--embedder", envvar="STANDARDAGENTS_MEMORY_EMBEDDER",
                                          help="offline, openai:<model>, or an embedding model definition as JSON.")]


def _namespace(text: str) -> tuple[str, ...]:
    from .memory._namespace import parse_dotted

    return parse_dotted(text) if text else ()


def _run(project: Path, database_url: str | None, embedder: str,
         body: Callable[[Any], Awaitable[T]]) -> T:
    """Open the memory store on the project's database, run ``body``, close; our errors are one line."""
    from .memory import MemoryStore, make_embedder
    from .memory.embedders import EmbedderConfig
    from .store import SQLStore, resolve_url

    async def main() -> T:
        spec: Any = embedder
        if embedder.startswith("{"):
            spec = EmbedderConfig.model_validate(json.loads(embedder))
        store = SQLStore(resolve_url(database_url, project_dir=project))
        memory = MemoryStore(store, embedder=make_embedder(spec))
        try:
            await memory.open()
            return await body(memory)
        finally:
            await memory.aclose()
            await store.close()

    try:
        return asyncio.run(main())
    except (StandardAgentsError, ValueError) as exc:
        err.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(1) from None


@memory_app.command("namespaces")
def namespaces(prefix: Annotated[str, typer.Argument(help="Dotted prefix, e.g. user.u1")] = "",
               project: ProjectOpt = Path("."), database_url: DbOpt = None,
               embedder: EmbedderOpt = "offline") -> None:
    """List the namespaces holding items (under PREFIX)."""
    found = _run(project, database_url, embedder, lambda m: m.list_namespaces(_namespace(prefix), limit=1000))
    for ns in found:
        out.print(".".join(ns))


@memory_app.command("search")
def search(prefix: Annotated[str, typer.Argument(help="Dotted namespace prefix ('' for all)")] = "",
           query: Annotated[str | None, typer.Option("--query", "-q", help="Rank by similarity to this text.")] = None,
           filter_json: Annotated[str | None, typer.Option("--filter", help='Value filter as JSON: {"kind": "pet"}.')] = None,
           limit: Annotated[int, typer.Option("--limit", "-n")] = 10,
           as_json: Annotated[bool, typer.Option("--json", help="One JSON item per line.")] = False,
           project: ProjectOpt = Path("."), database_url: DbOpt = None, embedder: EmbedderOpt = "offline") -> None:
    """Search items under PREFIX, by meaning with --query, by value with --filter."""
    flt = json.loads(filter_json) if filter_json else None
    items = _run(project, database_url, embedder,
                 lambda m: m.search(_namespace(prefix), query=query, filter=flt, limit=limit))
    for item in items:
        if as_json:
            out.print(json.dumps(item.to_dict(), ensure_ascii=False))
        else:
            score = f"{item.score:.3f} " if item.score is not None else ""
            out.print(f"{score}{'.'.join(item.namespace)} {item.key}: {json.dumps(item.value, ensure_ascii=False)}")


@memory_app.command("get")
def get(namespace: str, key: str, project: ProjectOpt = Path("."), database_url: DbOpt = None,
        embedder: EmbedderOpt = "offline") -> None:
    """Print one item as JSON (exit 1 when there is none)."""
    item = _run(project, database_url, embedder, lambda m: m.get(_namespace(namespace), key))
    if item is None:
        err.print(f"[bold red]error:[/] no item {key!r} in {namespace}")
        raise typer.Exit(1)
    out.print(json.dumps(item.to_dict(), ensure_ascii=False, indent=2))


@memory_app.command("put")
def put(namespace: str, key: str, value: Annotated[str, typer.Argument(help="The value, a JSON object.")],
        ttl: Annotated[float | None, typer.Option(help="Minutes until it expires.")] = None,
        project: ProjectOpt = Path("."), database_url: DbOpt = None, embedder: EmbedderOpt = "offline") -> None:
    """Store a value (replacing what was there)."""
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        err.print(f"[bold red]error:[/] VALUE is not JSON: {exc}")
        raise typer.Exit(1) from None
    _run(project, database_url, embedder, lambda m: m.put(_namespace(namespace), key, parsed, ttl=ttl))
    out.print(f"stored {namespace} {key}")


@memory_app.command("delete")
def delete(namespace: str, key: str, project: ProjectOpt = Path("."), database_url: DbOpt = None,
           embedder: EmbedderOpt = "offline") -> None:
    """Delete one item (the agent forgets it)."""
    removed = _run(project, database_url, embedder, lambda m: m.delete(_namespace(namespace), key))
    if not removed:
        err.print(f"[bold red]error:[/] no item {key!r} in {namespace}")
        raise typer.Exit(1)
    out.print(f"deleted {namespace} {key}")


@memory_app.command("export")
def export(prefix: Annotated[str, typer.Argument(help="Dotted prefix ('' for all)")] = "",
           output: Annotated[Path | None, typer.Option("--output", "-o", help="File to write (default: stdout).")] = None,
           project: ProjectOpt = Path("."), database_url: DbOpt = None, embedder: EmbedderOpt = "offline") -> None:
    """Write items as JSON Lines."""
    from .memory.jsonl import export_jsonl

    if output is None:
        count = _run(project, database_url, embedder, lambda m: export_jsonl(m, sys.stdout, _namespace(prefix)))
    else:
        with output.open("w", encoding="utf-8") as fh:
            count = _run(project, database_url, embedder, lambda m: export_jsonl(m, fh, _namespace(prefix)))
    err.print(f"exported {count} items")


@memory_app.command("import")
def import_(file: Annotated[Path, typer.Argument(help="A JSON Lines export ('-' for stdin).")],
            project: ProjectOpt = Path("."), database_url: DbOpt = None, embedder: EmbedderOpt = "offline") -> None:
    """Load items from JSON Lines (every line is checked before any is written)."""
    from .memory.jsonl import import_jsonl

    if str(file) == "-":
        count = _run(project, database_url, embedder, lambda m: import_jsonl(m, sys.stdin))
    else:
        if not file.is_file():
            err.print(f"[bold red]error:[/] no file {file}")
            raise typer.Exit(1)
        with file.open(encoding="utf-8") as fh:
            count = _run(project, database_url, embedder, lambda m: import_jsonl(m, fh))
    out.print(f"imported {count} items")


@memory_app.command("reembed")
def reembed(project: ProjectOpt = Path("."), database_url: DbOpt = None, embedder: EmbedderOpt = "offline") -> None:
    """Embed again, with --embedder, every item another embedder indexed."""
    count = _run(project, database_url, embedder, lambda m: m.reembed())
    out.print(f"re-embedded {count} items")


@memory_app.command("forget-user")
def forget_user_command(user_id: str, project: ProjectOpt = Path("."), database_url: DbOpt = None) -> None:
    """Remove everything of one user: threads, messages, files, memory, usage, event log, traces."""
    from .forget import forget_user_elsewhere

    async def body(memory: Any) -> Any:
        return await forget_user_elsewhere(memory.store, user_id)

    report = _run(project, database_url, "offline", body)
    out.print(json.dumps(report.to_dict(), indent=2))
