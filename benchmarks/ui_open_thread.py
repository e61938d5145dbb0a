"""How long the web app takes to open a long thread, and what the page weighs.

A thread of 1,000 messages (200 of them tool calls with their results, replies in markdown
with lists and code) is written straight into a SQLite store; the server runs in another
process with uvicorn on 127.0.0.1, and Debian's headless Chromium (through Playwright) loads
the app. Each round uses a fresh browser context (nothing cached), waits for the thread list,
then times a click on the thread until every message and tool card is drawn. It prints the
median, best and worst time to open, the bytes of html/js/css/svg the first load transferred
(the server does not compress them) file by file, what opening the thread loaded lazily (the
code highlighter), and the thread's JSON.

    python benchmarks/ui_open_thread.py --rounds 7
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_procs import free_port, wait_ready
from server_load import _start_server

__all__ = ["main"]

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]

REPLY = textwrap.dedent("""\
    Here is step {i}:

    - the **first** point, with `inline code`
    - the second point

    ```python
    def step_{i}(x):
        return x * {i}
    ```
    """)


def _write_project(root: Path) -> None:
    files = {
        "agents/agents/bench.py": "from standardagents import define_agent\n"
                                  "bench = define_agent(name='bench', side_a={'prompt': 'bench_prompt'})\n",
        "agents/prompts/bench_prompt.py": "from standardagents import define_prompt\n"
                                          "bench_prompt = define_prompt(name='bench_prompt', prompt='Answer.')\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


async def _seed(root: Path, database_url: str, tool_blocks: int, chat_pairs: int) -> tuple[str, str, int, int]:
    """A user with a token and one thread: ``tool_blocks`` of (question, tool call, result,
    reply) and ``chat_pairs`` of (question, reply). Returns token, thread id, message and
    tool call counts."""
    from standardagents.records import Message, ThreadRecord, ToolCall
    from standardagents.store import open_store

    store = open_store(database_url, project_dir=root)
    await store.open()
    try:
        user = await store.create_user("bench", is_admin=True)
        _, token = await store.create_api_token(user.id, "bench")
        thread = await store.create_thread(ThreadRecord(agent="bench", user_id=user.id, title="A long thread"))
        messages: list[Message] = []
        tid = thread.id
        for i in range(tool_blocks):
            call = ToolCall(id=f"call_{i}", name="lookup", arguments=json.dumps({"query": f"item {i}", "limit": 3}))
            messages += [
                Message(thread_id=tid, role="user", content=f"Question {i}: what about item {i}?"),
                Message(thread_id=tid, role="assistant", content=None, tool_calls=[call]),
                Message(thread_id=tid, role="tool", content=f"found {i}", tool_call_id=call.id, name="lookup",
                        tool_status="success"),
                Message(thread_id=tid, role="assistant", content=REPLY.format(i=i)),
            ]
        for i in range(chat_pairs):
            messages += [Message(thread_id=tid, role="user", content=f"And then {i}?"),
                         Message(thread_id=tid, role="assistant", content=f"Then **{i}**.")]
        for start in range(0, len(messages), 200):
            await store.commit_step(messages=messages[start:start + 200])
        return token, tid, len(messages), tool_blocks
    finally:
        await store.close()


async def _round(browser: Any, base: str, token: str, tool_calls: int,
                 bubbles: int) -> tuple[float, dict[str, int], dict[str, int]]:
    """One cold open: seconds from the click to the last card drawn, the bytes of each file
    the first load fetched, and of each file fetched on opening the thread (loaded lazily)."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    await context.add_init_script(f"localStorage.setItem('sa-token', {json.dumps(token)})")
    first: dict[str, int] = {}
    later: dict[str, int] = {}
    phase = first

    async def record(response: Any, into: dict[str, int]) -> None:
        path = "/" + response.url.split("//", 1)[-1].split("/", 1)[-1]
        if not path.startswith("/api/"):
            into[path] = len(await response.body())

    pending: list[asyncio.Task[None]] = []
    page = await context.new_page()
    page.on("response", lambda r: pending.append(asyncio.ensure_future(record(r, phase))))
    await page.goto(base + "/")
    await page.wait_for_selector("#thread-list .thread-name")
    await asyncio.gather(*pending)
    phase = later
    start = time.perf_counter()
    await page.click("#thread-list .thread-name")
    # a function (not an expression string): the page's Content-Security-Policy forbids eval
    await page.wait_for_function(
        "([cards, bubbles]) => document.querySelectorAll('#messages .tool-card').length === cards"
        " && document.querySelectorAll('#messages .msg').length === bubbles",
        arg=[tool_calls, bubbles], polling="raf", timeout=60_000)
    elapsed = time.perf_counter() - start
    # the highlighter arrives after the thread is drawn; it is weighed, not timed
    await page.wait_for_selector("#messages pre code .hljs-keyword", timeout=60_000)
    await asyncio.gather(*pending)
    await context.close()
    return elapsed, first, later


async def run(rounds: int, tool_blocks: int, chat_pairs: int) -> None:
    from playwright.async_api import async_playwright

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "project"
        _write_project(root)
        database_url = f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
        token, tid, count, calls = await _seed(root, database_url, tool_blocks, chat_pairs)
        bubbles = tool_blocks * 2 + chat_pairs * 2   # user questions and text replies
        port = free_port()
        server = _start_server(root, database_url, port)
        base = f"http://127.0.0.1:{port}"
        try:
            headers = {"Authorization": f"Bearer {token}"}
            await wait_ready(base, headers)
            async with httpx.AsyncClient(base_url=base, headers=headers) as client:
                api_bytes = 0
                for offset in range(0, count, 500):
                    page = await client.get(f"/api/threads/{tid}/messages", params={"limit": 500, "offset": offset})
                    api_bytes += len(page.content)
            async with async_playwright() as p:
                browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
                try:
                    times: list[float] = []
                    weights: dict[str, int] = {}
                    lazy: dict[str, int] = {}
                    for _ in range(rounds):
                        elapsed, weights, lazy = await _round(browser, base, token, calls, bubbles)
                        times.append(elapsed)
                finally:
                    await browser.close()
        finally:
            server.terminate()
            server.wait(10)
    print(f"thread: {count} messages, {calls} tool calls; {rounds} rounds, a fresh browser context each")
    print(f"open thread (click to last card drawn): median {statistics.median(times) * 1000:.0f} ms, "
          f"best {min(times) * 1000:.0f} ms, worst {max(times) * 1000:.0f} ms (target < 1000 ms)")
    total = sum(weights.values())
    print(f"page weight (html/js/css/svg, uncompressed): {total:,} bytes in {len(weights)} files")
    for path, size in sorted(weights.items(), key=lambda kv: -kv[1]):
        print(f"  {size:>8,}  {path}")
    print(f"loaded when the thread's code blocks appear: {sum(lazy.values()):,} bytes in {len(lazy)} files")
    for path, size in sorted(lazy.items(), key=lambda kv: -kv[1]):
        print(f"  {size:>8,}  {path}")
    print(f"thread JSON (GET messages, {-(-count // 500)} pages): {api_bytes:,} bytes")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tool-blocks", type=int, default=200, help="question, tool call, result, reply")
    parser.add_argument("--chat-pairs", type=int, default=100, help="question, reply")
    args = parser.parse_args(argv)
    asyncio.run(run(args.rounds, args.tool_blocks, args.chat_pairs))


if __name__ == "__main__":
    main()
