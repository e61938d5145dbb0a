"""``run_code`` in the real sandbox: Pyodide and JavaScript/TypeScript on Deno, limits
enforced from outside, hostile code ending with the right status while the host keeps
serving, the thread's files in and out, and the built-in ``run_code`` tool.

The tests share one warm pool (one module-wide event loop). Without the sandbox they skip
with the reason locally and fail under ``CI``, where scripts/test installs and warms it.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from engine_helpers import stub_model
from server_fixtures import write_project
from standardagents import Runtime, define_agent, define_prompt
from standardagents.project import build_registry
from standardagents.records import ThreadRecord
from standardagents.sandbox import CodeExecutionResult, SandboxPool, SandboxUnavailable, deno_binary
from standardagents.sandbox.process import pyodide_dir
from standardagents.server import create_app
from standardagents.testing.openai_stub import OpenAIStub, StubReply

pytestmark = pytest.mark.asyncio(loop_scope="module")

MiB = 1024 * 1024


def _unavailable() -> str | None:
    try:
        deno_binary()
    except SandboxUnavailable as exc:
        return str(exc)
    if not (pyodide_dir() / "pyodide.asm.wasm").exists():
        return f"Pyodide is not cached in {pyodide_dir()} (run: python -m standardagents.sandbox warm)"
    return None


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def pool() -> AsyncIterator[SandboxPool]:
    problem = _unavailable()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the sandbox is unavailable under CI: {problem}")
        pytest.skip(problem)
    sandbox = SandboxPool(size=1)
    await sandbox.warm()
    yield sandbox
    await sandbox.close()


async def _run(pool: SandboxPool, code: str, **options: Any) -> CodeExecutionResult:
    result, _ = await pool.run(code, scope="tests", **options)
    return result


async def test_python_result_logs_and_error(pool: SandboxPool) -> None:
    ok = await _run(pool, "import sys\nprint('to out')\nprint('to err', file=sys.stderr)\n{'answer': 6 * 7}")
    bad = await _run(pool, "def f():\n    raise KeyError('missing')\nf()")
    assert (ok.status, ok.result, ok.error) == ("completed", {"answer": 42}, None)
    assert [(log.stream, log.message) for log in ok.logs] == [("stdout", "to out"), ("stderr", "to err")]
    assert bad.status == "error" and bad.error is not None
    assert (bad.error.name, bad.error.message) == ("KeyError", "'missing'")
    assert 'line 2, in f' in bad.error.stack and "<run_code>" in bad.error.stack


async def test_each_python_run_starts_clean(pool: SandboxPool) -> None:
    await _run(pool, "leftover = 1\nopen('scratch.txt', 'w').write('x')")
    again = await _run(pool, "import os\n('leftover' in globals(), os.listdir('.'))")
    assert again.result == [False, []]


async def test_javascript_and_typescript(pool: SandboxPool) -> None:
    js = await _run(pool, "console.log('hello', {a: 1});\nconsole.error('careful');\nexport default [1, 'two'];",
                    language="javascript")
    ts = await _run(pool, "const n: number = 41;\nexport default { n: n + 1 };", language="typescript")
    thrown = await _run(pool, "throw new RangeError('out of range');", language="javascript")
    assert (js.status, js.result) == ("completed", [1, "two"])
    assert [(log.stream, log.message) for log in js.logs] == [("stdout", "hello { a: 1 }"), ("stderr", "careful")]
    assert (ts.status, ts.result) == ("completed", {"n": 42})
    assert thrown.status == "error" and thrown.error is not None
    assert (thrown.error.name, thrown.error.message) == ("RangeError", "out of range")


@pytest.mark.parametrize(("language", "code", "options", "status", "error_name"), [
    pytest.param("python", "while True:\n    pass", {"timeout": 2}, "timeout", "TimeoutError", id="py-infinite-loop"),
    pytest.param("javascript", "for (;;) {}", {"timeout": 2}, "timeout", "TimeoutError", id="js-infinite-loop"),
    pytest.param("python", "hog = []\nwhile True:\n    hog.append(' ' * 10**7)", {"memory_limit": 400 * MiB},
                 "killed", "MemoryLimitExceeded", id="py-memory-bomb"),
    pytest.param("javascript", "const hog = [];\nfor (;;) hog.push(new Array(1e6).fill(1.5));",
                 {"memory_limit": 500 * MiB}, "killed", "MemoryLimitExceeded", id="js-memory-bomb"),
    pytest.param("python", "import os\nwhile True:\n    os.fork()", {}, "error", "OSError", id="py-fork-bomb"),
    pytest.param("python", "import subprocess\nsubprocess.run(['sh', '-c', 'echo hi'])", {}, "error", "OSError",
                 id="py-subprocess"),
    pytest.param("javascript", "for (;;) await new Deno.Command('sh', {args: ['-c', ':']}).output();", {},
                 "error", "NotCapable", id="js-fork-bomb"),
    pytest.param("python", "open('/etc/passwd').read()", {}, "error", "FileNotFoundError", id="py-etc-passwd"),
    pytest.param("python", "import js\nawait js.Deno.readTextFile('/etc/passwd')", {}, "error", "JsException",
                 id="py-etc-passwd-through-js"),
    pytest.param("javascript", "export default await Deno.readTextFile('/etc/passwd');", {}, "error",
                 "NotCapable", id="js-etc-passwd"),
    pytest.param("javascript", "await Deno.writeTextFile('/tmp/sandbox-escape', 'x');", {}, "error",
                 "NotCapable", id="js-host-write"),
    pytest.param("python", "import socket\nsocket.create_connection(('127.0.0.1', 5432))", {}, "error", "OSError",
                 id="py-socket"),
    pytest.param("python", "import js\nawait js.fetch('http://127.0.0.1:5432/')", {}, "error", "JsException",
                 id="py-fetch-through-js"),
    pytest.param("javascript", "await Deno.connect({hostname: '127.0.0.1', port: 5432});", {}, "error",
                 "NotCapable", id="js-socket"),
])
async def test_hostile_code_ends_with_the_right_status(pool: SandboxPool, language: str, code: str,
                                                       options: dict[str, Any], status: str,
                                                       error_name: str) -> None:
    result = await _run(pool, code, language=language, **options)
    assert result.status == status
    assert result.error is not None and result.error.name == error_name
    after = await _run(pool, "'still serving'")
    assert (after.status, after.result) == ("completed", "still serving")


async def test_a_timeout_leaves_the_host_loop_free(pool: SandboxPool) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        loop_result, other = await asyncio.gather(
            _run(pool, "while True:\n    pass", timeout=2),
            pool.run("21 * 2", scope="another thread"))
    finally:
        task.cancel()
    assert loop_result.status == "timeout"
    assert (other[0].status, other[0].result) == ("completed", 42)
    assert ticks > 5


async def test_network_is_opt_in(pool: SandboxPool) -> None:
    with OpenAIStub() as stub:
        url = f"{stub.base_url}/models"
        code = f"const r = await fetch({json.dumps(url)});\nexport default r.status;"
        denied = await _run(pool, code, language="javascript")
        allowed = await _run(pool, code, language="javascript", network=True)
    assert denied.status == "error" and denied.error is not None and denied.error.name == "NotCapable"
    assert (allowed.status, allowed.result) == ("completed", 200)


async def test_bad_options_are_refused(pool: SandboxPool) -> None:
    with pytest.raises(ValueError, match="unknown language"):
        await _run(pool, "1", language="ruby")
    with pytest.raises(ValueError, match="timeout"):
        await _run(pool, "1", timeout=0)
    with pytest.raises(ValueError, match="memory_limit"):
        await _run(pool, "1", memory_limit=1024)


# the thread surface -----------------------------------------------------------------------------
async def test_thread_files_go_in_and_changes_come_back(pool: SandboxPool, backend: Any) -> None:
    store = backend.new_store()
    rt = await Runtime.open(build_registry(), store=store)
    rt.sandbox_pool = pool
    try:
        thread = await store.create_thread(ThreadRecord(agent="helper"))
        await store.write_file(thread.id, "/data/numbers.csv", b"1\n2\n3\n")
        await store.write_file(thread.id, "/old.txt", b"remove me")
        await store.write_file(thread.id, "/keep.txt", b"unchanged")
        state = await rt.state(thread.id)
        py = await state.run_code(
            "import os\n"
            "total = sum(int(x) for x in open('data/numbers.csv').read().split())\n"
            "os.makedirs('out', exist_ok=True)\n"
            "open('out/total.txt', 'w').write(str(total))\n"
            "os.remove('old.txt')\n"
            "total")
        js = await state.run_code(
            "const total = files.readText('out/total.txt');\n"
            "files.write('/data/numbers.csv', '10\\n20\\n');\n"
            "export default Number(total) * 2;", language="javascript", files=["**/*.csv", "/out/*"])
        only = await state.run_code("import os\nsorted(os.listdir('.'))", files=["/keep.txt"])
        assert (py.status, py.result) == ("completed", 6), py.error
        assert (py.files_written, py.files_deleted) == (["/out/total.txt"], ["/old.txt"])
        assert (js.status, js.result, js.files_written) == ("completed", 12, ["/data/numbers.csv"])
        assert only.result == ["keep.txt"]
        assert await store.read_file(thread.id, "/out/total.txt") == b"6"
        assert await store.read_file(thread.id, "/data/numbers.csv") == b"10\n20\n"
        assert await store.read_file(thread.id, "/old.txt") is None
        assert await store.read_file(thread.id, "/keep.txt") == b"unchanged"
    finally:
        rt.sandbox_pool = None
        await rt.aclose()


async def test_a_timed_out_run_writes_nothing_back(pool: SandboxPool, tmp_path: Any) -> None:
    rt = await Runtime.open(build_registry(), database_url=f"sqlite:///{tmp_path / 'db.sqlite'}")
    rt.sandbox_pool = pool
    try:
        thread = await rt.store.create_thread(ThreadRecord(agent="helper"))
        state = await rt.state(thread.id)
        result = await state.run_code("open('made.txt', 'w').write('x')\nwhile True:\n    pass", timeout=2)
        assert result.status == "timeout"
        assert await rt.store.list_files(thread.id) == []
    finally:
        rt.sandbox_pool = None
        await rt.aclose()


async def test_the_built_in_run_code_tool(pool: SandboxPool, tmp_path: Any) -> None:
    agent = define_agent(name="coder", side_a={"prompt": "coder_prompt", "stop_on_response": True})
    prompt = define_prompt(name="coder_prompt", prompt="Use run_code for arithmetic.", tools=["run_code"],
                           model="stub")
    with OpenAIStub() as stub:
        rt = await Runtime.open(build_registry(agent, prompt, stub_model(stub, name="stub")),
                                database_url=f"sqlite:///{tmp_path / 'db.sqlite'}")
        rt.sandbox_pool = pool
        try:
            stub.queue(StubReply(tool_calls=[("run_code", json.dumps({"code": "print('working')\n2 ** 10"}))]),
                       "It is 1024.")
            result = await rt.run("coder", "What is 2 to the 10th?")
            thread = await rt.get_thread(result.thread_id)
            tool_msg = next(m for m in await rt.store.list_messages(thread.id) if m.role == "tool")
            payload = json.loads(str(tool_msg.content))
            assert (payload["status"], payload["result"], payload["stdout"]) == ("completed", 1024, "working")
            sent_tools = [t["function"]["name"] for t in stub.requests[0]["tools"]]
            assert sent_tools == ["run_code"]
        finally:
            rt.sandbox_pool = None
            await rt.aclose()


async def test_missing_deno_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins
    import shutil

    real_import = builtins.__import__

    def no_deno(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "deno":
            raise ImportError("no deno")
        return real_import(name, *args, **kwargs)

    monkeypatch.delenv("STANDARDAGENTS_DENO", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_deno)
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    with pytest.raises(SandboxUnavailable) as caught:
        deno_binary()
    assert str(caught.value) == "run_code needs Deno, which the sandbox extra installs: pip install 'standardagents[sandbox]'"


# over HTTP: hostile code through a thread endpoint while the server answers others ----------------
RUN_ENDPOINT = """
    from standardagents import define_thread_endpoint

    @define_thread_endpoint
    async def run(req, state, params):
        body = await req.json()
        result = await state.run_code(body["code"], language=body.get("language", "python"),
                                      timeout=body.get("timeout", 10),
                                      memory_limit=body.get("memoryLimit", 512 * 1024 * 1024))
        return result.to_dict()
"""


async def test_the_server_keeps_serving_through_hostile_code(pool: SandboxPool, tmp_path: Any) -> None:
    project = write_project(tmp_path / "project", {"agents/api/run.post.py": RUN_ENDPOINT})
    rt = await Runtime.open(project, database_url=f"sqlite:///{tmp_path / 'server.db'}")
    rt.sandbox_pool = pool
    try:
        user = await rt.store.create_user("alice")
        _, token = await rt.store.create_api_token(user.id, "t")
        auth = {"authorization": f"Bearer {token}"}
        app = create_app(rt, close_runtime=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test",
                                     timeout=120) as client:
            thread = (await client.post("/api/threads", json={"agent": "helper"}, headers=auth)).json()
            url = f"/api/threads/{thread['id']}/run"
            cases = [
                ({"code": "while True:\n    pass", "timeout": 2}, "timeout"),
                ({"code": "hog = []\nwhile True:\n    hog.append(' ' * 10**7)", "memoryLimit": 400 * MiB}, "killed"),
                ({"code": "import os\nwhile True:\n    os.fork()"}, "error"),
                ({"code": "open('/etc/passwd').read()"}, "error"),
                ({"code": "await Deno.connect({hostname: '127.0.0.1', port: 5432});", "language": "javascript"},
                 "error"),
            ]
            for body, status in cases:
                hostile = asyncio.create_task(client.post(url, json=body, headers=auth))
                meanwhile = await client.get("/api/agents", headers=auth)
                # an endless loop can only end by the watchdog, so the server answered during it
                answered_during = not hostile.done() or status != "timeout"
                reply = await hostile
                assert meanwhile.status_code == 200 and answered_during
                assert (reply.status_code, reply.json()["status"]) == (200, status), reply.text
            after = await client.post(url, json={"code": "'still here'"}, headers=auth)
            assert after.json()["result"] == "still here"
    finally:
        rt.sandbox_pool = None
        await rt.aclose()


async def test_a_project_with_the_tool_warms_its_sandbox_ahead(pool: SandboxPool, tmp_path: Any) -> None:
    from standardagents.sandbox.thread import prewarm_sandbox

    coder = define_prompt(name="coder_prompt", prompt="Compute.", tools=["run_code"])
    plain = define_prompt(name="coder_prompt", prompt="Talk.")
    agent = define_agent(name="coder", side_a={"prompt": "coder_prompt"})
    with_tool = await Runtime.open(build_registry(agent, coder), database_url=f"sqlite:///{tmp_path / 'a.db'}")
    without = await Runtime.open(build_registry(agent, plain), database_url=f"sqlite:///{tmp_path / 'b.db'}")
    try:
        assert prewarm_sandbox(without) is False and without.sandbox_pool is None
        assert prewarm_sandbox(with_tool) is True
        warming = with_tool.sandbox_pool
        await asyncio.gather(*warming._refill)
        assert [proc.alive for proc in warming._fresh] == [True]
        thread = await with_tool.store.create_thread(ThreadRecord(agent="coder"))
        result = await (await with_tool.state(thread.id)).run_code("6 * 7")
        assert (result.status, result.result) == ("completed", 42)
    finally:
        await with_tool.aclose()
        await without.aclose()
    assert warming._fresh == [] and not any(warming._idle.values())
