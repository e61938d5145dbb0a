"""The ``standardagents`` command line: init, run, chat, validate, serve, dev, and more.

Every failure a user can cause prints one clear line and exits non-zero; tracebacks are
for bugs only (``STANDARDAGENTS_DEBUG=1`` shows them anyway).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

from .exceptions import DefinitionError, StandardAgentsError

__all__ = ["app", "main"]

#: commands that live beside the parts they drive (server, packages, effects, documents):
#: name -> (module, attribute, one-line help). They are imported when run, so a start that
#: does not run them (``--version``, ``--help``, ``init``) never loads the engine or the server.
LAZY_COMMANDS: dict[str, tuple[str, str, str]] = {
    "pack": (".packages.cli", "pack_command", "Pack an agent and everything it reaches into a Python distribution."),
    "unpack": (".packages.cli", "unpack_command",
               "Turn a packed package back into editable project files (same package, next version)."),
    "packages": (".packages.cli", "packages_command",
                 "List the packed packages a project sees, with the parent hooks each entry agent adds and "
                 "what each packed tool declares it touches (state it uses, variables, network hosts)."),
    "import": (".documents.cli", "import_command",
               "Write an agent document into a project as agent, prompt and model files."),
    "export": (".documents.cli", "export_command",
               "Write a project agent as a cubicecho.agent/1 document (no API key is ever written)."),
    "mcp": (".server.doors.cli", "mcp_command",
            "Serve the project's agents as MCP tools over stdin/stdout (for desktop apps and IDEs)."),
    "tokens": (".server.cli", "tokens_app", "Create, list and revoke API tokens."),
    "effects": (".effects_cli", "effects_app", "List, cancel and run scheduled effects."),
    "schedules": (".service.cli", "schedules_app", "List, add, pause, resume and delete schedules."),
    "threads": (".threads_cli", "threads_app", "List threads and show the steps of their turns."),
    "eval": (".evals_cli", "eval_app", "Run datasets of cases (eval PROJECT [DATASET...]); capture turns as cases."),
    "memory": (".memory_cli", "memory_app", "Browse, search, edit, export and forget long-term memory."),
}


class _LazyCommands(TyperGroup):
    """The root command group: listed and described without importing the commands in
    ``LAZY_COMMANDS``; one is imported when it is run (or its own help or completion is asked)."""

    def list_commands(self, ctx: Any) -> list[str]:
        # commands first, then groups (as typer lists them), each kind in the order declared
        names = super().list_commands(ctx)
        first_group = next((i for i, n in enumerate(names) if isinstance(self.commands[n], TyperGroup)), len(names))
        waiting = [name for name in LAZY_COMMANDS if name not in self.commands]
        commands = [n for n in waiting if not LAZY_COMMANDS[n][1].endswith("_app")]
        groups = [n for n in waiting if LAZY_COMMANDS[n][1].endswith("_app")]
        return [*names[:first_group], *commands, *names[first_group:], *groups]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = super().get_command(ctx, cmd_name)
        if found is None and cmd_name in LAZY_COMMANDS:  # listed in help or completion: its line only
            return TyperCommand(cmd_name, help=LAZY_COMMANDS[cmd_name][2])
        return found

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] in LAZY_COMMANDS and args[0] not in self.commands:
            self.commands[args[0]] = _load_lazy(args[0])
        return super().resolve_command(ctx, args)


app = typer.Typer(
    name="standardagents",
    help="Run Standard Agents projects: chat with agents, serve them over HTTP, pack and share them.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    cls=_LazyCommands,
)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def _flags_without_type_labels() -> None:
    """Typer's help labels an on/off flag ``<bool>`` as though it took a value; a flag takes
    none, so its help shows no type (every other option keeps its label)."""
    from typer.core import TyperOption

    shown = TyperOption.display_type_rich
    if getattr(shown, "_flags_unlabelled", False):
        return

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        return None if self.is_flag else shown(self, ctx)

    display_type_rich._flags_unlabelled = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flags_without_type_labels()


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        out.print(f"standardagents {version('standardagents')}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.", is_eager=True,
                                          callback=_print_version)] = False,
) -> None:
    """Run Standard Agents projects: chat with agents, serve them over HTTP, pack and share them."""


def _run_async(coroutine: Any) -> Any:
    """Run a command's coroutine (asyncio is imported only by the commands that need it)."""
    import asyncio

    return asyncio.run(coroutine)


def fail(message: str, code: int = 1) -> None:
    """Print one clear error line and exit."""
    err.print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code)


def _guard(fn: Any) -> Any:
    """Run a command body, turning our errors into one line each."""
    try:
        return fn()
    except typer.Exit:
        raise
    except DefinitionError as exc:
        what = "the agent document does not load" if str(exc.source or "").endswith(".json") or any(
            str(w).endswith(".json") or ".json" in str(w) for w, _ in exc.problems) else "the project does not validate"
        err.print(f"[bold red]error:[/] {what}:")
        root = Path(exc.source) if exc.source and not str(exc.source).endswith(".json") else None
        for where, msg in exc.problems:
            shown = with_line(root, where, msg) if root is not None and where else msg
            err.print(escape(f"  {where}: {shown}" if where else f"  {msg}"))
        raise typer.Exit(1) from None
    except StandardAgentsError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        err.print("interrupted")
        raise typer.Exit(130) from None
    except Exception as exc:
        if os.environ.get("STANDARDAGENTS_DEBUG"):
            raise
        fail(f"{type(exc).__name__}: {exc}")


#: the exit code of a command line that is wrong (an unknown agent, a choice left to make)
EXIT_USAGE = 2


def with_line(root: Path | None, file: str, message: str) -> str:
    """``message`` about ``file`` (relative to the project ``root``) led by the line it is
    about, when the message does not say it already: the line naming what the message quotes
    (an unknown name, a duplicate), else the field it names, else the file's first
    ``define_`` call. The project loads definitions by running files, so a definition's
    problems carry its file and field; the line is found in the file's text."""
    import re

    path = (root / file) if root is not None else Path(file)
    if re.match(r"line \d+\b", message) or not path.is_file():
        return message
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return message
    quoted = re.findall(r"'([^'\n]{1,200})'", message)
    fields = [part for part in re.split(r"[.\[\]]", message.split(":", 1)[0]) if part.isidentifier()][::-1]
    patterns = [re.compile(rf"""(['"]){re.escape(value)}\1""") for value in quoted]
    for field in fields:
        camel = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), field)
        for name in dict.fromkeys((field, camel)):
            patterns.append(re.compile(rf"""\b{name}\s*=|(['"]){name}\1\s*:"""))
    patterns.append(re.compile(r"\bdefine_\w+\s*\(|^\s*@define_"))
    for pattern in patterns:
        for number, text in enumerate(lines, 1):
            if pattern.search(text):
                return f"line {number}: {message}"
    return message


def usage_error(message: str) -> None:
    """A command line that cannot be run as written: one line, exit code 2."""
    fail(message, EXIT_USAGE)


ProjectArg = Annotated[Path, typer.Argument(help="The project folder (the one holding agents/).")]
DbOpt = Annotated[str | None, typer.Option("--database-url", envvar="STANDARDAGENTS_DATABASE_URL", help="SQLAlchemy URL; default: SQLite under .standardagents/.")]
ModelOpt = Annotated[str | None, typer.Option("--model", help="Use this model definition for every prompt.")]


@app.command()
def init(directory: Annotated[Path, typer.Argument(help="Where to create the project.")] = Path("my-agents")) -> None:
    """Create a starter project that runs at once: an assistant, a debate and a researcher.

    Writes <directory>/agents/ (a copy of the quickstart example) and nothing else:

    agents/: assistant (a calculator, a clock and the researcher as tools), debate (two AI
    sides argue, the skeptic gives the verdict) and researcher (a subagent the assistant
    calls).

    prompts/: what each side is told (assistant_prompt, debate_advocate, debate_skeptic,
    researcher_lead, researcher_reviewer).

    tools/: calculate, current_time, conclude, save_notes, report_progress, deliver_findings.

    hooks/: count_tool_calls (a running count per thread).

    It answers on the offline test model until OPENAI_API_KEY is set or agents/models/ names
    a model. A folder that already holds agents/ is left untouched."""
    from .scaffold import create_project

    _guard(lambda: create_project(directory))
    where = shlex.quote(str(directory))
    tries = [(f'run {where} --agent assistant "What is 12 * 7?"', "a tool"),
             (f'run {where} --agent assistant "Research the history of tabs and spaces"', "a subagent"),
             (f'run {where} --agent debate "Tabs or spaces?"', "two AI sides"),
             (f"chat {where} --agent assistant", "a conversation"),
             (f"serve {where} --dev", "then open http://127.0.0.1:8000/ (no token needed locally)")]
    width = max(len(command) for command, _ in tries)
    out.print(f"Created [bold]{escape(str(directory))}[/] (on the offline test model until OPENAI_API_KEY is set). Try:")
    for command, what in tries:
        out.print(escape(f"  standardagents {command.ljust(width)}   # {what}"))


@app.command()
def validate(project: ProjectArg) -> None:
    """Check a project: every definition and every reference, all problems at once."""
    from .project import load_project_problems

    registry, problems = _guard(lambda: load_project_problems(project))
    problems.extend(_shadowed_routes(registry))
    errors = [p for p in problems if not p.warning]
    for p in problems:
        if p.warning:
            out.print(f"[yellow]warning[/]: {escape(str(p))}")
        else:
            shown = f"{p.file}: {with_line(project, p.file, p.message)}" if p.file else p.message
            err.print(f"[red]error[/]: {escape(shown)}")
    if errors:
        err.print(f"[bold red]{len(errors)} problem(s)[/] in {project}")
        raise typer.Exit(1)
    out.print(f"[green]ok[/]: {len(registry.names('agents'))} agent(s), {len(registry.names('prompts'))} prompt(s), "
              f"{len(registry.names('tools'))} tool(s), {len(registry.names('hooks'))} hook(s)")
    from .tool_declarations import declaration_lines

    for line in declaration_lines(registry):
        out.print(f"  {escape(line)}", highlight=False)
    for entry in registry.entries("agents"):
        agent = entry.value
        if agent is None:  # a packed agent, loaded on first use: its package was checked above
            continue
        for req in getattr(agent, "parent_hooks", []):
            out.print(f"  {agent.name}: adds parent hook [bold]{req.hook}[/] ({req.stage}) - {req.reason}")
        if agent is None or entry.package is not None or agent.type != "ai_human":
            continue  # packed agents are loaded on use; documents describe ai_human agents only
        for side in (agent.side_a, agent.side_b):
            prompt = registry.get("prompts", side.prompt) if side is not None and registry.has("prompts", side.prompt) else None
            if prompt is not None and prompt.output_type is not None:
                out.print(f"  {agent.name}: note: prompt {prompt.name} has an output_type, which `export` does not "
                          "carry (a cubicecho.agent/1 document has no output schema)")


def _choose_agent(names: list[str], given: str | None) -> str:
    """The agent to talk to: the one given, the only primary one, or the person's pick among
    the primary ones (subagents are not offered); without a terminal to ask on, a clear error."""
    if given:
        return given
    if len(names) == 1:
        return names[0]
    if not names:
        usage_error("the project has no primary agent; name one with --agent")
    if not sys.stdin.isatty():
        usage_error(f"the project has several agents; choose one with --agent ({', '.join(names)})")
    for i, name in enumerate(names, 1):
        err.print(f"  {i}. {escape(name)}")
    while True:
        try:
            answer = input(f"Which agent? [1-{len(names)}] ").strip()
        except EOFError:
            raise typer.Exit(1) from None
        if answer in names:
            return answer
        if answer.isdigit() and 1 <= int(answer) <= len(names):
            return names[int(answer) - 1]
        err.print(f"type a number from 1 to {len(names)} or an agent's name")


def _project_for_agent(project: Path, agent: str | None) -> tuple[Any, str]:
    """Load a project for one agent: a broken file the agent never reaches is a warning, not
    a stop (``validate`` lists every problem)."""
    from .exceptions import ProjectError
    from .project import load_project_problems, problems_reaching

    registry, problems = load_project_problems(project)
    errors = [p for p in problems if not p.warning]
    if not registry.root or not (Path(registry.root) / "agents").is_dir():
        raise ProjectError([(p.file, p.message) for p in errors], source=str(project))
    primary = [e.name for e in registry.entries("agents") if e.value is not None and e.value.primary]
    name = _choose_agent(primary, agent)
    blocking = problems_reaching(registry, errors, name)
    if blocking:
        raise ProjectError([(p.file, p.message) for p in blocking], source=str(project))
    if not registry.has("agents", name):
        known = [e.name for e in registry.entries("agents") if e.value is not None]
        usage_error(f"unknown agent {name!r}; the project's agents: {', '.join(sorted(known)) or 'none'}")
    if errors:
        err.print(f"[yellow]warning:[/] {len(errors)} problem(s) elsewhere in the project do not affect "
                  f"{escape(name)} (standardagents validate {escape(str(project))} lists them)")
    return registry, name


def side_labels(registry: Any, agent: str) -> dict[str, str]:
    """How to name each side when printing a conversation: the sides' labels, else A and B."""
    definition = registry.get("agents", agent) if registry.has("agents", agent) else None
    labels = {"a": "A", "b": "B"}
    for key in labels:
        side = getattr(definition, f"side_{key}", None)
        if side is not None and side.label:
            labels[key] = side.label.upper()
    return labels


def _rich_output() -> bool:
    """Whether stdout is a terminal that shows Rich's rendering (a pipe gets plain text)."""
    return bool(out.is_terminal and not out.is_dumb_terminal)


async def _print_turn(sub: Any, task: Any, labels: dict[str, str] | None = None) -> Any:
    """Print one execution's events as they come, until its ``done``; returns its result."""
    from .turn_view import TurnView

    view = TurnView(out, rich=_rich_output(), labels=labels)
    try:
        while True:
            event = await sub.get()
            if event.type == "done":
                break
            view.handle(event)
    finally:
        view.close()
    result = await task
    if result.outcome in ("session_stop", "session_fail") and (result.payload or {}).get("message"):
        who = (labels or {}).get(result.stopped_by or "", "")
        verb = "concluded" if result.outcome == "session_stop" else "gave up"
        out.print(f"[bold]{escape(who or 'the agent')} {verb}:[/] {escape(str(result.payload['message']))}")
    return result


#: ``run`` and ``approve`` exit codes: how the turn ended (documented in the README)
EXIT_COMPLETE, EXIT_FAILED, EXIT_GUARDRAIL, EXIT_APPROVAL, EXIT_INTERRUPTED, EXIT_CANCELLED = 0, 1, 3, 4, 5, 130


def turn_exit_code(result: Any) -> int:
    """The exit code that tells a script how a turn ended."""
    if result.outcome == "approval_required":
        return EXIT_APPROVAL
    if result.outcome == "guardrail":
        return EXIT_GUARDRAIL
    if result.stop_reason == "error":
        return EXIT_FAILED
    if result.stop_reason == "cancelled":
        return EXIT_CANCELLED
    if result.stop_reason == "interrupted":
        return EXIT_INTERRUPTED
    return EXIT_COMPLETE


async def _stream_run(rt: Any, thread_id: str, message: str | None, *, show_reasoning: bool = False,
                      interactive: bool = False, project: str = "PROJECT", labels: dict[str, str] | None = None) -> Any:
    """Send a message and print the reply as it streams, with tool activity. Ctrl-C stops the
    turn (the partial reply is kept); approvals are asked for when ``interactive``."""
    import asyncio
    import signal

    loop = asyncio.get_running_loop()
    sub = rt.subscribe(thread_id, reasoning=show_reasoning)
    task = await rt.start(thread_id, message)
    handled = False
    try:
        loop.add_signal_handler(signal.SIGINT, lambda: loop.create_task(rt.stop(thread_id)))
        handled = True
    except (NotImplementedError, RuntimeError, ValueError):
        pass
    try:
        while True:
            result = await _print_turn(sub, task, labels)
            if result.outcome != "approval_required" or not result.payload:
                return result
            next_task = None
            for request in result.payload.get("approvals", []):
                call = f"{request['tool']}({json.dumps(request['arguments'])})"
                if not interactive:
                    err.print(f"[yellow]waiting for approval:[/] {escape(call)}\n  approve: standardagents approve "
                              f"{escape(project)} {request['token']}\n  deny:    standardagents approve "
                              f"{escape(project)} {request['token']} --deny")
                    continue
                answer = await loop.run_in_executor(None, input, f"Allow {call}? [y/N] ")
                next_task = await rt.decide(request["token"], answer.strip().lower() in ("y", "yes")) or next_task
            if next_task is None:
                return result
            task = next_task
    finally:
        if handled:
            loop.remove_signal_handler(signal.SIGINT)
        sub.close()


@app.command()
def run(
    target: Annotated[Path, typer.Argument(help="A project folder, or an agent document (.json).")],
    message: Annotated[str, typer.Argument(help="The message to send.")],
    agent: Annotated[str | None, typer.Option("--agent", "-a", help="The agent to run (project folders).")] = None,
    layer: Annotated[list[Path] | None, typer.Option("--layer", help="Agent document layers beneath the document (weakest first).")] = None,
    thread: Annotated[str | None, typer.Option("--thread", help="Continue this thread instead of starting one.")] = None,
    database_url: DbOpt = None,
    model: ModelOpt = None,
    reasoning: Annotated[bool, typer.Option("--reasoning", help="Show the model's reasoning.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON instead of streaming.")] = False,
) -> None:
    """Send one message to an agent and stream its reply (tool activity shown live).

    Exit codes: 0 the turn completed, 1 it failed (or the command could not run), 3 a
    guardrail stopped it, 4 it waits for an approval, 5 it hit a limit (max_steps), 130 it
    was cancelled."""

    async def main() -> int:
        from .engine import Runtime

        if target.suffix == ".json":
            from .documents.bridge import registry_from_document

            registry, name, notes = registry_from_document(target, layers=list(layer or []))
            for note in notes:
                err.print(f"[yellow]warning[/]: {escape(note)}")
        else:
            registry, name = _project_for_agent(target, agent)
        from .observability import configure_from_env

        configure_from_env()  # OTEL_* variables: this turn's spans go to the configured exporter
        rt = await Runtime.open(registry, database_url=database_url, model_override=model)
        try:
            thread_id = thread or (await rt.create_thread(name)).id
            if as_json:
                result = await rt.send(thread_id, message)
                out.print_json(json.dumps(result.to_dict()))
            else:
                result = await _stream_run(rt, thread_id, message, show_reasoning=reasoning,
                                           interactive=sys.stdin.isatty(), project=shlex.quote(str(target)),
                                           labels=side_labels(registry, name))
                err.print(f"[dim]thread {thread_id} · {result.stop_reason}"
                          + (f" · {result.outcome}" if result.outcome not in (result.stop_reason, "response") else "")
                          + _spend(result) + "[/]")
            if result.stop_reason == "error" and as_json:  # when streaming, it was shown as it happened
                err.print(f"[red]error:[/] {escape(str(result.error))}")
            return turn_exit_code(result)
        finally:
            await rt.aclose()

    code = _guard(lambda: _run_async(main()))
    raise typer.Exit(code)


def _spend(result: Any) -> str:
    """`` · N tokens (I in / O out) · $C`` for a finished turn (the cost only when known)."""
    usage = result.usage or {}
    if not usage:
        return ""
    prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    text = f" · {prompt + completion:,} tokens ({prompt:,} in / {completion:,} out)"
    if result.cost is not None:
        text += f" · ${result.cost:.6f}".rstrip("0").rstrip(".")
    return text


@app.command()
def chat(
    project: ProjectArg,
    agent: Annotated[str | None, typer.Option("--agent", "-a", help="The agent to talk to (default: the only primary one, or asked).")] = None,
    thread: Annotated[str | None, typer.Option("--thread", help="Resume this thread.")] = None,
    database_url: DbOpt = None,
    model: ModelOpt = None,
) -> None:
    """Talk with an agent interactively, with line editing and history (Ctrl-C stops a reply;
    /help lists the chat's commands; Ctrl-D or /quit leaves)."""

    async def main() -> int:
        from .chat import ChatSession, LineReader
        from .engine import Runtime

        registry, name = _project_for_agent(project, agent)
        primary = [e.name for e in registry.entries("agents") if e.value is not None and e.value.primary]
        rt = await Runtime.open(registry, database_url=database_url, model_override=model)

        async def new_thread(agent_name: str) -> str:
            return str((await rt.create_thread(agent_name)).id)

        async def send(thread_id: str, text: str) -> None:
            result = await _stream_run(rt, thread_id, text, interactive=True, project=shlex.quote(str(project)),
                                       labels=side_labels(registry, session.agent))
            if result.stop_reason == "cancelled":
                out.print("[dim](stopped)[/]")
            elif result.usage:
                err.print(f"[dim]{_spend(result).removeprefix(' · ')}[/]")

        try:
            session = ChatSession(
                agents=primary if name in primary else [name, *primary], agent=name,
                thread_id=thread or await new_thread(name),
                reader=LineReader(Path(registry.root or project) / ".standardagents" / "chat_history"),
                new_thread=new_thread, send=send, say=lambda text: out.print(f"[dim]{escape(text)}[/]"))
            await session.run()
            return 0
        finally:
            await rt.aclose()

    raise typer.Exit(_guard(lambda: _run_async(main())))


def _shadowed_routes(registry: Any) -> list[Any]:
    """Thread endpoints a built-in route hides, as errors (the server's routes are imported
    only when the project has thread endpoints to check)."""
    from .project import Problem

    if not registry.all_entries("thread_endpoints"):
        return []
    from .server.endpoints import shadowed_thread_endpoints

    return [Problem("agents/api", text) for text in shadowed_thread_endpoints(registry)]


def _preflight(project: Path, database_url: str | None, *, lenient: bool = False) -> Any:
    """Check the project and the database before serving, so a mistake is one clear line
    rather than a failed server start-up; returns the loaded registry.

    ``lenient`` (``dev``): a file that does not load is reported with its line and the rest
    of the project is served, as ``run`` runs the agents a broken file does not reach."""
    from .exceptions import ProjectError
    from .project import load_project, load_project_problems
    from .store import open_store

    if lenient:
        registry, problems = load_project_problems(project)
        errors = [p for p in problems if not p.warning]
        if not registry.root or not (Path(registry.root) / "agents").is_dir():
            raise ProjectError([(p.file, p.message) for p in errors], source=str(project))
        for problem in errors:
            shown = f"{problem.file}: {with_line(project, problem.file, problem.message)}" if problem.file else problem.message
            err.print(f"[red]error[/]: {escape(shown)}")
        if errors:
            err.print(f"[yellow]warning:[/] {len(errors)} problem(s): serving the rest of the project; what reaches "
                      "these files answers with an error until they are fixed (a saved fix is picked up at once)")
    else:
        registry = load_project(project)
    shadowed = _shadowed_routes(registry)
    if shadowed:
        for problem in shadowed:
            err.print(f"[red]error[/]: {escape(str(problem))}")
        fail(f"{len(shadowed)} thread endpoint(s) can never be reached; see above")

    async def check() -> None:
        store = open_store(database_url, project_dir=Path(registry.root or project))
        await store.open()
        await store.close()

    _run_async(check())
    return registry


def _refuse_sqlite_workers(project: Path, database_url: str | None, workers: int) -> None:
    """Several workers on one SQLite file would queue behind each other's write lock (and
    see only their own live events): refuse in one line, pointing at PostgreSQL."""
    from .store import resolve_url

    url = resolve_url(database_url, project_dir=project)
    if url.split(":", 1)[0].split("+", 1)[0] == "sqlite":
        fail(f"--workers {workers} needs PostgreSQL: on SQLite only one process writes at a time; "
             "pass --database-url postgresql://... (or serve with one worker)")


def _check_port(host: str, port: int) -> None:
    """Refuse a port another program holds, before anything says it is serving."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc}")
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            fail(f"cannot listen on {host}:{port}: {exc.strerror or exc} (another server may be running there; "
                 "choose another --port)")


LogFormatOpt = Annotated[str, typer.Option(
    "--log-format",
    help="json: one JSON object per line, with trace_id, span_id, thread_id and execution_id inside a turn.")]


def _use_log_format(value: str) -> None:
    """Refuse an unknown format; set up a known one before the project loads, so what its
    modules log is in the format too."""
    if value not in ("text", "json"):
        raise typer.BadParameter(f"{value!r} is not a log format: use text or json", param_hint="--log-format")
    from .observability.logs import configure_logging

    configure_logging(value)


def _announce(log_format: str, line: str) -> None:
    """The server's start-up line (Rich markup): printed, or a log record in the JSON format."""
    if log_format == "json":
        import logging

        from rich.text import Text

        logging.getLogger("standardagents.server").info(Text.from_markup(line).plain)
    else:
        out.print(line)


TraceUrlOpt = Annotated[str | None, typer.Option(
    "--trace-url",
    help="Link each turn's trace id in the web app's inspector, e.g. http://localhost:16686/trace/{trace_id} "
         "(sets STANDARDAGENTS_TRACE_URL).")]


def _set_trace_url(template: str | None) -> None:
    """Hand the trace link template to the server (and its workers) through the environment."""
    if template is None:
        return
    from .server.traces import TRACE_URL_ENV, check_template

    problem = check_template(template)
    if problem is not None:
        raise typer.BadParameter(f"{template!r}: {problem}", param_hint="--trace-url")
    os.environ[TRACE_URL_ENV] = template


@app.command()
def serve(
    project: ProjectArg,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    workers: Annotated[int, typer.Option(help="Worker processes (use PostgreSQL for more than one).")] = 1,
    database_url: DbOpt = None,
    dev: Annotated[bool, typer.Option("--dev", help="Imply a local admin user when no credentials are sent.")] = False,
    titles: Annotated[bool, typer.Option("--titles", help="Name new threads with a short model-written title.")] = False,
    reload_project: Annotated[bool, typer.Option(
        "--reload-project", help="Reload the project's definitions when its files change (off by default).")] = False,
    log_format: LogFormatOpt = "text",
    graceful_timeout: Annotated[float, typer.Option(
        "--graceful-timeout", min=0,
        help="Seconds running turns get to finish after SIGTERM; the rest are handed over to another worker.")] = 30.0,
    trace_url: TraceUrlOpt = None,
    auth_issuer: Annotated[str | None, typer.Option(
        "--auth-issuer", help="Accept bearer JWTs from this OpenID Connect issuer (its discovery document names its keys).",
        envvar="STANDARDAGENTS_AUTH_ISSUER")] = None,
    auth_jwks_url: Annotated[str | None, typer.Option(
        "--auth-jwks-url", help="Accept bearer JWTs signed by the keys at this JWKS URL.",
        envvar="STANDARDAGENTS_AUTH_JWKS_URL")] = None,
    auth_audience: Annotated[str | None, typer.Option(
        "--auth-audience", help="The audience (aud) those JWTs must be made for.",
        envvar="STANDARDAGENTS_AUTH_AUDIENCE")] = None,
    auth_algorithms: Annotated[str | None, typer.Option(
        "--auth-algorithms", help="Accepted JWT algorithms, comma-separated (default RS256,ES256).",
        envvar="STANDARDAGENTS_AUTH_ALGORITHMS")] = None,
    auth_client_id: Annotated[str | None, typer.Option(
        "--auth-client-id", help="The web app's client id at the issuer: the web app signs in there.",
        envvar="STANDARDAGENTS_AUTH_CLIENT_ID")] = None,
) -> None:
    """Serve the project: REST API, live streams, its endpoints and the web chat."""
    from .server import run_server
    from .server.oidc import settings_from_flags

    try:
        settings_from_flags(issuer=auth_issuer, jwks_url=auth_jwks_url, audience=auth_audience,
                            algorithms=auth_algorithms, client_id=auth_client_id)
    except StandardAgentsError as exc:
        raise typer.BadParameter(str(exc), param_hint="--auth-*") from None
    if titles:
        os.environ["STANDARDAGENTS_AUTO_TITLES"] = "1"
    _set_trace_url(trace_url)
    _use_log_format(log_format)
    registry = _guard(lambda: _preflight(project, database_url))
    if workers > 1:
        _refuse_sqlite_workers(project, database_url, workers)
    _check_port(host, port)
    if workers == 1:
        from .server.warmup import warm_first_turn

        warm_first_turn(registry)  # several workers each warm up in their own process
    _announce(log_format, f"[bold]standardagents[/] serving {escape(str(project))} on http://{host}:{port}/ (API under /api)")
    _guard(lambda: run_server(project, host=host, port=port, workers=workers, database_url=database_url, dev=dev,
                              watch=reload_project, log_format=log_format, graceful_timeout=graceful_timeout))


@app.command()
def dev(
    project: ProjectArg,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    database_url: DbOpt = None,
    log_format: LogFormatOpt = "text",
    trace_url: TraceUrlOpt = None,
) -> None:
    """Serve for local development: a local user is implied and every saved change to the
    project (endpoints too) is served at once; a broken file is reported with its line while
    the last good version keeps answering (at start, the rest of the project is served)."""
    from .server import run_server

    _set_trace_url(trace_url)
    _use_log_format(log_format)
    registry = _guard(lambda: _preflight(project, database_url, lenient=True))
    _check_port(host, port)
    from .server.warmup import warm_first_turn

    warm_first_turn(registry)
    _announce(log_format, f"[bold]standardagents dev[/] on http://{host}:{port}/ (reloads on change)")
    # the registry already loaded (what loaded of it) is served: Runtime.open takes a Registry
    # as well as a folder, and run_server hands it on
    _guard(lambda: run_server(registry, host=host, port=port, database_url=database_url, dev=True,
                              watch=True, log_format=log_format))


@app.command()
def approve(
    project: ProjectArg,
    token: Annotated[str, typer.Argument(help="The resume token of the paused call.")],
    deny: Annotated[bool, typer.Option("--deny", help="Deny the call instead of approving it.")] = False,
    reason: Annotated[str | None, typer.Option("--reason", help="Why (the model reads it when denied).")] = None,
    database_url: DbOpt = None,
) -> None:
    """Approve (or deny) a tool call waiting for a person; the turn continues at once."""

    async def main() -> int:
        from .engine import Runtime
        from .project import load_project

        rt = await Runtime.open(load_project(project), database_url=database_url)
        try:
            task = await rt.decide(token, not deny, reason=reason)
            if task is None:
                out.print("recorded; other calls of this turn still wait for a decision")
                return EXIT_APPROVAL
            result = await task
            if result.text:
                out.print(result.text, markup=False)
            err.print(f"[dim]thread {result.thread_id} · {result.stop_reason}[/]")
            return turn_exit_code(result)
        finally:
            await rt.aclose()

    raise typer.Exit(_guard(lambda: _run_async(main())))


schema_app = typer.Typer(help="Print JSON Schemas (for editors' autocompletion).", no_args_is_help=True)
app.add_typer(schema_app, name="schema")


@schema_app.command("agent-document")
def schema_agent_document() -> None:
    """The JSON Schema of a cubicecho.agent/1 agent document."""
    from .documents import document_schema

    sys.stdout.write(json.dumps(document_schema(), indent=2) + "\n")


def _load_lazy(name: str) -> Any:
    """The click command of a command that lives beside the part it drives, imported now."""
    import importlib

    import typer.main

    module, attribute, help_text = LAZY_COMMANDS[name]
    target = getattr(importlib.import_module(module, __package__), attribute)
    holder = typer.Typer(add_completion=False)
    holder.callback()(lambda: None)
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name, help=help_text)
    else:
        holder.command(name)(target)
    return typer.main.get_command(holder).commands[name]  # type: ignore[attr-defined]


def main() -> None:
    """Console-script entry point."""
    app()
