"""The conversation loop of ``standardagents chat``.

At a terminal, lines are read with prompt_toolkit (editing, and a history kept per project
across sessions); from a pipe, plain lines are read, so scripts and tests drive the same loop.
Lines starting with ``/`` are commands for the chat itself and never reach the model.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

__all__ = ["COMMANDS_HELP", "ChatSession", "LineReader"]

COMMANDS_HELP = """\
/help           this list
/new            start a new thread with the same agent
/agent          list the agents you can talk to
/agent NAME     start a new thread with agent NAME
/quit           leave (also /exit or Ctrl-D)
//text          send "/text" to the agent"""


class LineReader:
    """Reads the person's lines: prompt_toolkit at a terminal, plain lines otherwise."""

    def __init__(self, history_file: Path | None = None) -> None:
        self._session: Any = None
        if sys.stdin.isatty() and sys.stdout.isatty():
            from prompt_toolkit import PromptSession
            from prompt_toolkit.history import FileHistory, InMemoryHistory

            history: Any = InMemoryHistory()
            if history_file is not None:
                try:
                    history_file.parent.mkdir(parents=True, exist_ok=True)
                    history = FileHistory(str(history_file))
                except OSError:
                    pass  # a read-only project still chats, without a saved history
            self._session = PromptSession(history=history)

    async def read(self, prompt: str) -> str | None:
        """The next line, or ``None`` at the end of input. Ctrl-C at the prompt clears the line."""
        if self._session is not None:
            while True:
                try:
                    return str(await self._session.prompt_async(prompt))
                except KeyboardInterrupt:
                    continue
                except EOFError:
                    return None
        line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        return line.rstrip("\r\n") if line else None


class ChatSession:
    """One person's chat: the current agent and thread, and the commands that change them."""

    def __init__(self, *, agents: list[str], agent: str, thread_id: str, reader: LineReader,
                 new_thread: Callable[[str], Awaitable[str]], send: Callable[[str, str], Awaitable[Any]],
                 say: Callable[[str], None]) -> None:
        self.agents = agents
        self.agent = agent
        self.thread_id = thread_id
        self.reader = reader
        self._new_thread = new_thread
        self._send = send
        self._say = say

    def banner(self) -> str:
        return f"{self.agent} · thread {self.thread_id} · /help for commands, /quit to leave"

    async def run(self) -> None:
        self._say(self.banner())
        while True:
            line = await self.reader.read("you> ")
            if line is None:
                return
            text = line.strip()
            if not text:
                continue
            if text.startswith("/") and not text.startswith("//"):
                if not await self.command(text):
                    return
                continue
            await self._send(self.thread_id, text[1:] if text.startswith("//") else line)

    async def command(self, text: str) -> bool:
        """Run a chat command; ``False`` means leave."""
        word, _, rest = text.partition(" ")
        rest = rest.strip()
        if word in ("/quit", "/exit"):
            return False
        if word == "/help":
            self._say(COMMANDS_HELP)
        elif word == "/new":
            self.thread_id = await self._new_thread(self.agent)
            self._say(self.banner())
        elif word == "/agent" and not rest:
            self._say("agents: " + ", ".join(f"{a} (current)" if a == self.agent else a for a in self.agents))
        elif word == "/agent":
            if rest not in self.agents:
                self._say(f"unknown agent {rest!r}; choose one of: {', '.join(self.agents)}")
            else:
                self.agent = rest
                self.thread_id = await self._new_thread(rest)
                self._say(self.banner())
        else:
            self._say(f"unknown command {word}; /help lists the commands (//text sends /text to the agent)")
        return True
