"""Command-line commands for packed agents: ``pack``, ``unpack`` and ``packages``.

Each is a plain function ready for ``app.command()`` so the main CLI can mount them at the
top level; ``packages_app`` bundles them for use on their own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ..exceptions import StandardAgentsError
from ..project import Problem
from .discover import discover_packages
from .pack import pack_project
from .unpack import unpack

__all__ = ["pack_command", "packages_app", "packages_command", "unpack_command"]

console = Console()
err_console = Console(stderr=True)


def _fail(exc: Exception) -> typer.Exit:
    err_console.print(f"[red]error:[/red] {exc}", highlight=False, markup=True)
    return typer.Exit(1)


def pack_command(
    project: Annotated[Path, typer.Argument(help="The agents project folder.")],
    agent: Annotated[str, typer.Option("--agent", "-a", help="The agent to pack (it becomes the entry agent).")],
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Where to write the package (default: PROJECT/dist/packed).")] = None,
    wheel: Annotated[bool, typer.Option("--wheel", help="Also build the wheel.")] = False,
) -> None:
    """Pack an agent and everything it reaches into a Python distribution."""
    try:
        result = pack_project(project, agent, out_dir=out, wheel=wheel)
    except StandardAgentsError as exc:
        raise _fail(exc) from None
    console.print(f"packed [bold]{agent}[/bold] -> {result}", highlight=False)


def unpack_command(
    dist: Annotated[str, typer.Argument(help="A wheel, a packed folder, or an installed packed distribution's name.")],
    into: Annotated[Path, typer.Option("--into", help="The project to write the definitions into.")],
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace files that already exist.")] = False,
) -> None:
    """Turn a packed package back into editable project files (same package, next version)."""
    try:
        written = unpack(dist, into, overwrite=overwrite)
    except StandardAgentsError as exc:
        raise _fail(exc) from None
    for path in written:
        console.print(f"wrote {path}", highlight=False)


def packages_command(
    project: Annotated[Path, typer.Argument(help="The agents project folder.")] = Path("."),
) -> None:
    """List the packed packages a project sees, with the parent hooks each entry agent adds and
    what each packed tool declares it touches (state it uses, variables, network hosts)."""
    problems: list[Problem] = []
    found = discover_packages(project, problems=problems)
    if not found:
        console.print("no packed packages found")
    else:
        from ..tool_declarations import describe_declaration

        table = Table("package", "version", "source", "entry agents", "parent hooks", "what its tools touch")
        for info in sorted(found, key=lambda i: i.package_id):
            hooks = []
            for agent in info.entry_agents:
                for req in info.parent_hooks.get(agent, []):
                    stage = req.get("stage", "after_parent")
                    hooks.append(f"{agent}: {req.get('hook')} ({stage}) - {req.get('reason', '')}")
            touches = [describe_declaration(name, declared) for name, declared in sorted(info.tool_declarations.items())]
            table.add_row(info.package_id, info.version, info.source, ", ".join(info.entry_agents),
                          "\n".join(hooks) or "none", "\n".join(touches) or "nothing declared")
        console.print(table)
    for problem in problems:
        err_console.print(f"[yellow]warning:[/yellow] {problem}", highlight=False)


packages_app = typer.Typer(help="Pack, unpack and list packed agents.", no_args_is_help=True)
packages_app.command("pack")(pack_command)
packages_app.command("unpack")(unpack_command)
packages_app.command("packages")(packages_command)
