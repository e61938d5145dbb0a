"""How ``run`` and ``chat`` show a turn: at a terminal the reply is rendered as markdown while
it streams (Rich) and each tool call is one line (name, short arguments, status); through a
pipe the reply's text is written as it comes, so scripts read exactly what the model wrote.

The view only formats events (``message_chunk``, ``reasoning_chunk``, ``tool_call_started``,
``tool_call_done``, ``approval.request``, ``guardrail``, ``error``); the command decides when a
turn ends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from rich.console import Console, ConsoleOptions, Group
from rich.live import Live
from rich.markdown import Markdown
from rich.markup import escape
from rich.segment import Segment
from rich.text import Text

__all__ = ["TurnView", "short_arguments"]

#: the most characters of a tool call's arguments shown on its line
ARGUMENTS_WIDTH = 60


def short_arguments(arguments: Any, width: int = ARGUMENTS_WIDTH) -> str:
    """A call's arguments as ``name="value", n=2``, cut to ``width`` characters."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            pass
    if isinstance(arguments, dict):
        text = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items())
    else:
        text = "" if arguments is None else json.dumps(arguments, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _open_fence(text: str) -> bool:
    """Whether ``text`` ends inside a fenced code block."""
    return sum(1 for line in text.splitlines() if line.lstrip().startswith(("```", "~~~"))) % 2 == 1


class _Paragraph:
    """Markdown rendered without the blank lines around it (the view puts one between
    paragraphs itself, as markdown rendered whole would)."""

    def __init__(self, text: str) -> None:
        self.markdown = Markdown(text)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        lines = console.render_lines(self.markdown, options, pad=False)

        def blank(line: list[Segment]) -> bool:  # whitespace with no background (a code block's padding has one)
            return all(not seg.text.strip() and (seg.style is None or seg.style.bgcolor is None) for seg in line)

        while lines and blank(lines[0]):
            lines.pop(0)
        while lines and blank(lines[-1]):
            lines.pop()
        for line in lines:
            yield from line
            yield Segment.line()


class TurnView:
    """Prints one conversation's events; ``rich`` renders markdown and live tool lines (a
    terminal), otherwise plain text is written (a pipe)."""

    def __init__(self, console: Console, *, rich: bool, labels: dict[str, str] | None = None) -> None:
        self.console = console
        self.rich = rich
        self.labels = labels or {}
        self.printed_text = False
        self._side: str | None = None
        self._block = ""  # markdown not yet printed for good (rich mode)
        self._paragraphs = 0  # paragraphs of the current text printed for good (rich mode)
        self._text_live: Live | None = None  # the paragraph being written (rich mode)
        self._calls_live: Live | None = None  # the calls still running (rich mode)
        self._calls: dict[str, dict[str, Any]] = {}  # calls started and not yet shown done
        self._order: list[str] = []
        self._line_open = False  # text was written without its newline
        self._reasoning = False  # the model's reasoning is being written

    # -- events -------------------------------------------------------------------------
    def handle(self, event: Any) -> None:
        kind, data = event.type, event.data
        if kind == "message_chunk":
            self._text(data.get("side"), str(data.get("delta") or ""))
        elif kind == "reasoning_chunk":
            if not self._reasoning:
                self._end_text()
                self._reasoning = True
            self.console.print(f"[dim]{escape(str(data.get('delta') or ''))}[/]", end="")
            self._line_open = True
        elif kind == "tool_call_started":
            self._end_text()
            self._calls[str(data.get("id"))] = {"name": data.get("name"), "arguments": data.get("arguments"),
                                                "status": None}
            self._order.append(str(data.get("id")))
            self._show_calls()
        elif kind == "tool_call_done":
            self._end_text()
            call = self._calls.setdefault(str(data.get("id")), {"name": data.get("name")})
            if str(data.get("id")) not in self._order:
                self._order.append(str(data.get("id")))
            call["arguments"] = data.get("arguments", call.get("arguments"))
            call["status"] = data.get("status") or "success"
            call["error"] = data.get("error")
            self._show_calls()
        elif kind == "approval.request":
            self._end_text()
            call = self._calls.setdefault(str(data.get("id")), {"name": data.get("tool")})
            if str(data.get("id")) not in self._order:
                self._order.append(str(data.get("id")))
            call["arguments"] = data.get("arguments")
            call["status"] = "waiting"
            self._show_calls()
        elif kind == "guardrail":
            self._end_text()
            self._say(f"[yellow]guardrail {escape(str(data.get('guardrail')))} stopped the {data.get('kind')}: "
                      f"{escape(str(data.get('info')))}[/]")
        elif kind == "error":
            self._end_text()
            self._say(f"[red]error: {escape(str(data.get('message')))}[/]")

    def close(self) -> None:
        """The turn ended: print what is still pending (calls left waiting included)."""
        self._end_text()
        for call in self._calls.values():
            if call.get("status") is None:
                call["status"] = "waiting"
        self._show_calls(final=True)
        if self._line_open:
            self.console.print()
            self._line_open = False

    # -- text ---------------------------------------------------------------------------
    def _text(self, side: str | None, delta: str) -> None:
        if self._reasoning:
            self._end_text()
        if side and side != self._side:
            self._end_text()
            self._side = side
            label = self.labels.get(side, side.upper())
            if self.rich:
                self.console.print(f"\n[bold cyan]{escape(label)}[/]")
            else:
                self.console.print(f"\n[bold cyan]{escape(label)}[/]: ", end="")
                self._line_open = True
        self.printed_text = True
        if not self.rich:
            self.console.print(delta, end="", markup=False, highlight=False)
            self._line_open = True
            return
        self._block += delta
        # a finished paragraph (outside a code block) is printed for good; the rest stays live
        cut = self._block.rfind("\n\n")
        if cut > 0 and not _open_fence(self._block[:cut]):
            done, self._block = self._block[:cut], self._block[cut + 2:]
            self._settle(self._text_live, _Paragraph(done))
            self._text_live = None
            self._paragraphs += 1
        if self._block.strip():
            if self._text_live is None:
                if self._paragraphs:
                    self.console.print()  # the space markdown puts between paragraphs
                self._text_live = Live(console=self.console, auto_refresh=False, vertical_overflow="visible")
                self._text_live.start()
            self._text_live.update(_Paragraph(self._block), refresh=True)

    def _settle(self, live: Live | None, final: Any) -> None:
        """Print ``final`` for good, in place of what ``live`` showed (if anything)."""
        if live is not None:
            live.update(final, refresh=True)
            live.stop()
        else:
            self.console.print(final)

    def _end_text(self) -> None:
        """Print the reply's text so far for good (before a tool line or the turn's end)."""
        if self.rich:
            if self._block.strip():
                self._settle(self._text_live, _Paragraph(self._block))
            elif self._text_live is not None:
                self._text_live.stop()
            self._text_live = None
            self._block = ""
            self._paragraphs = 0
        if self._line_open:
            self.console.print()
            self._line_open = False
        self._reasoning = False

    # -- tool calls -----------------------------------------------------------------------
    def _line(self, call: dict[str, Any]) -> Text:
        status = call.get("status")
        mark = {"success": ("✓", "green"), None: ("…", "yellow"), "waiting": ("⏸ waiting for approval", "yellow")}
        symbol, style = mark.get(status, ("✗", "red"))
        line = Text("▸ ", style="dim")
        line.append(str(call.get("name")), style="bold")
        line.append(f"({short_arguments(call.get('arguments'))})", style="dim")
        line.append(f" {symbol}", style=style)
        if status not in ("success", None, "waiting"):
            error = " ".join(str(call.get("error") or status).split())
            line.append(f" {error[:100]}", style=style)
        return line

    def _show_calls(self, *, final: bool = False) -> None:
        """Rich: the running calls live, each done one printed for good once all are done.
        Plain: each call printed once, when it is done."""
        finished = [i for i in self._order if self._calls[i].get("status") is not None]
        if not self.rich:
            for call_id in finished:
                self.console.print(self._line(self._calls.pop(call_id)))
            self._order = [i for i in self._order if i in self._calls]
            return
        lines = Group(*(self._line(self._calls[i]) for i in self._order))
        if final or len(finished) == len(self._order):
            if self._order:
                self._settle(self._calls_live, lines)
            self._calls_live = None
            self._calls.clear()
            self._order.clear()
            return
        if self._calls_live is None:
            self._calls_live = Live(console=self.console, auto_refresh=False)
            self._calls_live.start()
        self._calls_live.update(lines, refresh=True)

    def _say(self, markup: str) -> None:
        if self._line_open:
            self.console.print()
            self._line_open = False
        self.console.print(markup)
