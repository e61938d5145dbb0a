"""``standardagents eval``: run a project's datasets as an experiment, and capture stored
turns as cases.

``standardagents eval PROJECT [DATASET...]`` runs every case (a progress bar while it runs,
a table at the end), writes the JSON report and JUnit XML when asked, compares with a
baseline report, stores the run, and exits 1 when a case fails (2 for a usage error).
``standardagents eval capture THREAD_ID --out FILE`` turns a stored turn into a case.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

from .exceptions import StandardAgentsError

__all__ = ["eval_app"]


class _RunByDefault(TyperGroup):
    """``eval PROJECT ...`` means ``eval run PROJECT ...``; ``eval capture ...`` its own."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        result: list[str] = super().parse_args(ctx, args)
        return result


eval_app = typer.Typer(name="eval", help="Run datasets of cases against a project's agents "
                       "(standardagents eval PROJECT [DATASET...], short for eval run); capture turns as cases.",
                       no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                       cls=_RunByDefault)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

DbOpt = Annotated[str | None, typer.Option("--database-url", envvar="STANDARDAGENTS_DATABASE_URL",
                                           help="SQLAlchemy URL; default: SQLite under .standardagents/.")]


def _datasets(project: Path, names: list[str]) -> tuple[list[Any], list[str]]:
    """The datasets named (files, or names under the project's evals/), and the problems of
    those that cannot be read."""
    from .evals import DatasetError, discover_datasets, load_dataset

    paths: list[Path] = []
    problems: list[str] = []
    if not names:
        paths = discover_datasets(project)
        if not paths:
            problems.append(f"{project / 'evals'}: no dataset files (*.yaml, *.jsonl)")
    for name in names:
        candidates = [Path(name), project / name, *(project / "evals" / f"{name}{ext}"
                                                    for ext in (".yaml", ".yml", ".jsonl"))]
        found = next((p for p in candidates if p.is_file()), None)
        if found is None:
            problems.append(f"{name}: no such dataset (a file, or a name under {project / 'evals'})")
        else:
            paths.append(found)
    loaded = []
    for path in paths:
        try:
            loaded.append(load_dataset(path))
        except DatasetError as exc:
            problems.append(str(exc))
    return loaded, problems


def _system_text(rt: Any, prompt: str | None) -> str | None:
    """A ``--prompt`` as the system prompt's text: a prompt definition's name, a file, or text."""
    if prompt is None:
        return None
    if rt.registry.has("prompts", prompt):
        text = getattr(rt.registry.get("prompts", prompt), "prompt", None)
        if isinstance(text, str):
            return text
    path = Path(prompt)
    if len(prompt) < 1024 and "\n" not in prompt and path.is_file():
        return path.read_text(encoding="utf-8")
    return prompt


def _case_line(case: Any) -> str:
    mark = "[green]PASS[/]" if case.passed else "[red]FAIL[/]"
    scores = " ".join(f"{s.name}={s.score:.2f}" for s in case.scores)
    cost = f"${case.cost:.4f}" if case.cost is not None else "-"
    rep = f" #{case.repeat + 1}" if case.repeat else ""
    line = f"{mark} {case.dataset}/{case.name}{rep}  {scores}  {case.tokens} tok  {cost}  {case.latency_ms:.0f} ms"
    if not case.passed:
        reason = case.error or "; ".join(f"{s.name}: {s.reason}" for s in case.scores if not s.passed)
        line += f"\n     {reason}"
    return line


def _table(report: dict[str, Any]) -> Table:
    table = Table(title=f"{report['passed']} passed, {report['failed']} failed")
    for column in ("case", "result", "scores", "tokens", "cost", "latency"):
        table.add_column(column, justify="right" if column in ("tokens", "cost", "latency") else "left")
    for c in report["cases"]:
        rep = f" #{c['repeat'] + 1}" if c.get("repeat") else ""
        table.add_row(f"{c['dataset']}/{c['name']}{rep}", "[green]pass[/]" if c["passed"] else "[red]fail[/]",
                      " ".join(f"{s['name']}={s['score']:.2f}" for s in c["scores"]) or (c.get("error") or "")[:60],
                      str(c.get("tokens") or 0), f"${c['cost']:.4f}" if c.get("cost") is not None else "-",
                      f"{c.get('latencyMs') or 0:.0f} ms")
    return table


@eval_app.command("run")
def run_command(
    project: Annotated[Path, typer.Argument(help="The project folder (the one holding agents/ and evals/).")],
    datasets: Annotated[list[str] | None, typer.Argument(help="Dataset files or names under evals/ (default: all).")] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Cases run at a time.")] = 4,
    repeats: Annotated[int, typer.Option("--repeats", "-r", min=1, help="Runs of each case (flaky models).")] = 1,
    model: Annotated[str | None, typer.Option("--model", help="A model definition to use instead of the agents'.")] = None,
    prompt: Annotated[str | None, typer.Option("--prompt", help="A system prompt instead of the agents': a prompt name, a file or text.")] = None,
    report: Annotated[Path | None, typer.Option("--report", help="Write the JSON report here.")] = None,
    junit: Annotated[Path | None, typer.Option("--junit", help="Write a JUnit XML here (for CI).")] = None,
    baseline: Annotated[Path | None, typer.Option("--baseline", help="An earlier JSON report to compare with.")] = None,
    label: Annotated[str | None, typer.Option("--label", help="A name for this run in listings.")] = None,
    store: Annotated[bool, typer.Option("--store/--no-store", help="Keep the run in the project's database.")] = True,
    database_url: DbOpt = None,
) -> None:
    """Run every case of the datasets; exit 1 when a case fails or a score is below its threshold."""
    from .evals import report as reports

    loaded, problems = _datasets(project, list(datasets or []))
    for problem in problems:
        err.print(f"[bold red]error:[/] {problem}")
    base = None
    if baseline is not None:
        try:
            base = reports.load_report(baseline)
        except StandardAgentsError as exc:
            err.print(f"[bold red]error:[/] {exc}")
            raise typer.Exit(2) from None
    if not loaded:
        raise typer.Exit(2 if not datasets and not problems else 1)
    result = asyncio.run(_run(project, loaded, concurrency, repeats, model, prompt, label, store, database_url))
    if result is None:
        raise typer.Exit(1)
    out.print(_table(result))
    summary = result["summary"]
    cost = f"${summary['cost']:.4f}" if summary.get("cost") is not None else "-"
    out.print(f"{summary['cases']} cases in {summary['durationMs'] / 1000:.2f} s, {summary['tokens']} tokens, {cost}"
              + (f"; stored as {result['id']}" if store else ""))
    if base is not None:
        changes = reports.compare(result, base)
        out.print(f"against {baseline}: " + ("no change" if not changes else f"{len(changes)} changed"))
        for change in changes:
            colour = "red" if change["kind"] in ("regression", "score_down") else "green" if change["kind"] in (
                "fixed", "score_up") else "yellow"
            out.print(f"  [{colour}]{change['kind']}[/] {change['dataset']}/{change['name']}: {change['detail']}")
        result["baseline"] = {"file": str(baseline), "changes": changes}
    if report is not None:
        reports.write_json(result, report)
    if junit is not None:
        reports.write_junit(result, junit)
    if result["failed"] or problems:
        raise typer.Exit(1)


async def _run(project: Path, loaded: list[Any], concurrency: int, repeats: int, model: str | None,
               prompt: str | None, label: str | None, keep: bool, database_url: str | None) -> dict[str, Any] | None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .engine import Runtime
    from .evals import RunOptions, run_experiment
    from .evals.storage import save_run

    try:
        rt = await Runtime.open(project, database_url=database_url, take_over=False)
    except StandardAgentsError as exc:
        err.print(f"[bold red]error:[/] {exc}")
        return None
    try:
        if model is not None and not rt.registry.has("models", model):
            err.print(f"[bold red]error:[/] --model: no model definition named {model!r}")
            return None
        options = RunOptions(concurrency=concurrency, repeats=repeats, model=model, system=_system_text(rt, prompt),
                             label=label, project=project)
        total = sum(len(d.cases) for d in loaded) * repeats
        with Progress(TextColumn("eval"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=err, transient=True) as progress:
            task = progress.add_task("cases", total=total)

            def done(case: Any) -> None:
                progress.console.print(_case_line(case))
                progress.advance(task)

            result = await run_experiment(rt, loaded, options, on_case=done)
        if keep:
            await save_run(rt.store, result)
        return result
    finally:
        await rt.aclose()


@eval_app.command("capture")
def capture_command(
    thread_id: Annotated[str, typer.Argument(help="The thread whose turn becomes a case.")],
    out_file: Annotated[Path, typer.Option("--out", "-o", help="The dataset file to add the case to.")],
    execution: Annotated[str | None, typer.Option("--execution", help="Which turn (default: the latest).")] = None,
    name: Annotated[str | None, typer.Option("--name", help="The case's name.")] = None,
    project: Annotated[Path, typer.Option("--project", "-p", help="The project folder.")] = Path("."),
    database_url: DbOpt = None,
) -> None:
    """Turn a stored turn into a case: its input, history, model replies and tool results.

    The original reply is the case's reference; standardagents eval replays it."""
    from .engine import Runtime
    from .evals import capture_turn, write_case

    async def main() -> dict[str, Any]:
        rt = await Runtime.open(project, database_url=database_url, take_over=False)
        try:
            return await capture_turn(rt.store, thread_id, execution, name=name)
        finally:
            await rt.aclose()

    try:
        case = asyncio.run(main())
        write_case(out_file, case)
    except StandardAgentsError as exc:
        err.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(1) from None
    calls = len(case["replay"]["tools"])
    out.print(f"captured {case['name']} ({len(case['replay']['model'])} model replies, {calls} tool calls) "
              f"into {out_file}")
