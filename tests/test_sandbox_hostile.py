"""``run_code`` against code that attacks the host or later runs: output floods that would
fill the server's memory (raw writes to the sandbox's stdout/stderr, endless lines, huge
results, errors and files) end bounded, with the server's own memory barely moved; and
nothing one run does to its interpreter (helpers, modules, builtins, JavaScript globals,
Pyodide's file system) reaches the next run of the same thread.

Like ``test_sandbox.py``, these run the real sandbox: they skip locally without it and fail
under ``CI``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from standardagents import Runtime
from standardagents.project import build_registry
from standardagents.records import ThreadRecord
from standardagents.sandbox import CodeExecutionResult, SandboxPool, SandboxUnavailable, deno_binary
from standardagents.sandbox.pool import MAX_LOG_CHARS, MAX_LOG_LINES
from standardagents.sandbox.process import pyodide_dir

pytestmark = pytest.mark.asyncio(loop_scope="module")

MiB = 1024 * 1024
#: how much the server's resident memory may grow while one flooding run is handled
HOST_GROWTH_BOUND = 64 * MiB


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


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise LookupError(field)


class HostMemory:
    """The server process's resident memory around one run: ``grew`` from VmRSS before and
    after, ``peak_grew`` from the kernel's high-water mark (reset before the run, where
    ``/proc/self/clear_refs`` lets us; else the same as ``grew``)."""

    def __enter__(self) -> HostMemory:
        self.before = _status_kib("VmRSS") * 1024
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")  # reset VmHWM to the current resident size
            self.peak_known = True
        except OSError:
            self.peak_known = False
        return self

    def __exit__(self, *exc: object) -> None:
        self.after = _status_kib("VmRSS") * 1024
        self.peak = _status_kib("VmHWM") * 1024 if self.peak_known else self.after
        self.grew = self.after - self.before
        self.peak_grew = self.peak - self.before


async def _still_serving(pool: SandboxPool, scope: str) -> None:
    after, _ = await pool.run("'still serving'", scope=scope)
    assert (after.status, after.result) == ("completed", "still serving")


def _output_chars(result: CodeExecutionResult) -> int:
    return sum(len(log.message) + 1 for log in result.logs)


# output floods ----------------------------------------------------------------------------------
FLOOD = """
import js
chunk = js.Uint8Array.new(8 * 1024 * 1024)
chunk.fill({byte})
{last}
for _ in range(32):  # 256 MiB
    js.Deno.{stream}.writeSync(chunk)
'not reached'
"""


@pytest.mark.parametrize(("language", "code"), [
    pytest.param("python", FLOOD.format(byte=120, last="chunk[len(chunk) - 1] = 10", stream="stdout"),
                 id="py-stdout-lines"),
    pytest.param("python", FLOOD.format(byte=0, last="", stream="stdout"), id="py-stdout-no-newline"),
    pytest.param("python", FLOOD.format(byte=120, last="chunk[len(chunk) - 1] = 10", stream="stderr"),
                 id="py-stderr-lines"),
    pytest.param("python", FLOOD.format(byte=0, last="", stream="stderr"), id="py-stderr-no-newline"),
    pytest.param("javascript", "const chunk = new Uint8Array(8 * 1024 * 1024).fill(0);\n"
                 "for (let i = 0; i < 32; i++) Deno.stdout.writeSync(chunk);", id="js-stdout-no-newline"),
])
async def test_raw_writes_past_the_output_cap_end_the_run(pool: SandboxPool, language: str, code: str) -> None:
    with HostMemory() as memory:
        result, _ = await pool.run(code, language=language, scope="flood", timeout=60)
    assert result.status == "killed"
    assert result.error is not None and result.error.name == "OutputLimitExceeded"
    assert "output" in result.error.message
    assert _output_chars(result) <= MAX_LOG_CHARS + 100
    assert memory.grew < HOST_GROWTH_BOUND, f"the server grew by {memory.grew / MiB:.0f} MiB"
    assert memory.peak_grew < HOST_GROWTH_BOUND, f"the server peaked {memory.peak_grew / MiB:.0f} MiB higher"
    await _still_serving(pool, "flood")


async def test_a_partial_raw_write_does_not_hide_the_reply(pool: SandboxPool) -> None:
    result, _ = await pool.run("import js\njs.Deno.stdout.writeSync(js.TextEncoder.new().encode('no newline'))\n42",
                               scope="flood")
    assert (result.status, result.result, result.stdout) == ("completed", 42, "no newline")


@pytest.mark.parametrize(("language", "code"), [
    pytest.param("python", "for _ in range(200_000):\n    print()", id="py-empty-lines"),
    pytest.param("javascript", "for (let i = 0; i < 200000; i++) console.log('');", id="js-empty-lines"),
    pytest.param("python", "for _ in range(50):\n    print('x' * 1_000_000)", id="py-long-lines"),
])
async def test_printed_output_is_cut_at_the_caps(pool: SandboxPool, language: str, code: str) -> None:
    with HostMemory() as memory:
        result, _ = await pool.run(code, language=language, scope="flood", timeout=60)
    assert result.status == "completed"
    assert len(result.logs) <= MAX_LOG_LINES
    assert _output_chars(result) <= MAX_LOG_CHARS + 100
    assert result.logs[-1].message == "[output truncated]"
    assert memory.grew < HOST_GROWTH_BOUND, f"the server grew by {memory.grew / MiB:.0f} MiB"


async def test_a_result_past_the_cap_is_an_error(pool: SandboxPool) -> None:
    result, _ = await pool.run("'x' * 2_000_000", scope="flood")
    assert result.status == "error" and result.error is not None
    assert result.error.name == "OutputLimitExceeded"
    assert result.result is None


async def test_a_huge_error_message_is_cut(pool: SandboxPool) -> None:
    result, _ = await pool.run("raise ValueError('x' * 3_000_000)", scope="flood")
    assert result.status == "error" and result.error is not None
    assert result.error.name == "ValueError"
    assert len(result.error.message) < 200_000 and len(result.error.stack) < 200_000


async def test_files_past_the_cap_are_not_written_back(pool: SandboxPool) -> None:
    given = {"keep.txt": b"kept"}
    result, files = await pool.run("open('big.bin', 'wb').write(b'x' * 70_000_000)\nopen('keep.txt', 'w').write('x')",
                                   scope="flood", files=given, timeout=60)
    assert result.status == "completed"
    assert files == given
    assert "files were not written back" in result.stderr


# a run can't change what the next run of the same thread starts with --------------------------------
NEXT_RUN = """
import json, os
print("genuine")
data = open("in.txt").read()
open("out.txt", "w").write(data.upper())
[json.dumps({"n": 1}), sorted(os.listdir(".")), data]
"""
GENUINE = ['{"n": 1}', ["in.txt", "out.txt"], "input"]

TAMPERING = {
    # each patch stays quiet in its own run and acts in the next (whose workspace has in.txt)
    "module-attribute": """
import json, os
real = json.dumps
def dumps(obj, *args, **kwargs):
    if os.path.exists("/workspace/in.txt") and not isinstance(obj, dict):
        obj = "tampered"
    return real(obj, *args, **kwargs)
json.dumps = dumps
""",
    "helper-function": """
import __main__, json, os
for name in [n for n in dir(__main__) if n.startswith("_sa_") and ("snapshot" in n or "files" in n)]:
    real = getattr(__main__, name)
    def files(*args, real=real):
        if os.path.exists("/workspace/in.txt"):
            return json.dumps({"evil.txt": "ZXZpbA=="})
        return real(*args)
    setattr(__main__, name, files)
""",
    "helper-code": """
import __main__
async def tampered(code, *args):
    import json
    return json.dumps({"ok": True, "resultJson": json.dumps("tampered")})
__main__._sa_run.__code__ = tampered.__code__
""",
    "builtins": """
import builtins, io
real_open, real_print = builtins.open, builtins.print
def fake_open(path, *args, **kwargs):
    if str(path).endswith("in.txt"):
        return io.StringIO("tampered")
    return real_open(path, *args, **kwargs)
builtins.open = fake_open
builtins.print = lambda *args, **kwargs: real_print("tampered")
""",
    "sys-modules": """
import sys, types
fake = types.ModuleType("json")
fake.dumps = lambda *args, **kwargs: "tampered"
sys.modules["json"] = fake
""",
    "js-global-the-runner-writes-with": """
import js
from pyodide.ffi import create_proxy
stdout = js.Deno.stdout
real = stdout.writeSync.bind(stdout)
def write(data):
    text = js.TextDecoder.new().decode(data)
    if "in.txt" in text:
        text = text.replace("genuine", "tampered")
    real(js.TextEncoder.new().encode(text))
    return data.length
stdout.writeSync = create_proxy(write)
""",
    "pyodide-file-system": """
import pyodide_js
from pyodide.ffi import create_proxy
real = pyodide_js.FS.writeFile
pyodide_js.FS.writeFile = create_proxy(lambda path, data, *rest: real(path, "tampered"))
""",
}


@pytest.mark.parametrize("tampering", list(TAMPERING.values()), ids=list(TAMPERING))
async def test_a_run_cannot_change_the_next_runs_helpers(pool: SandboxPool, tampering: str) -> None:
    await pool.run(tampering, scope="tampered thread")
    result, files = await pool.run(NEXT_RUN, scope="tampered thread", files={"in.txt": b"input"})
    assert (result.status, result.result, result.stdout) == ("completed", GENUINE, "genuine"), result.error
    assert files == {"in.txt": b"input", "out.txt": b"INPUT"}


async def test_a_thread_gets_only_the_files_its_run_wrote(pool: SandboxPool, tmp_path: Any) -> None:
    rt = await Runtime.open(build_registry(), database_url=f"sqlite:///{tmp_path / 'db.sqlite'}")
    rt.sandbox_pool = pool
    try:
        thread = await rt.store.create_thread(ThreadRecord(agent="helper"))
        await rt.store.write_file(thread.id, "/in.txt", b"input")
        state = await rt.state(thread.id)
        forge = TAMPERING["js-global-the-runner-writes-with"].replace(
            'text = text.replace("genuine", "tampered")',
            'text = text.replace(\'"files": {\', \'"files": {"evil.txt": "ZXZpbA==", \')'
            '.replace(\'"files":{\', \'"files":{"evil.txt":"ZXZpbA==",\')')
        first = await state.run_code(forge, files=[])
        second = await state.run_code(NEXT_RUN)
        assert first.status == "completed", first.error
        assert (second.status, second.result, second.files_written) == ("completed", GENUINE, ["/out.txt"])
        paths = sorted(record.path for record in await rt.store.list_files(thread.id))
        assert paths == ["/in.txt", "/out.txt"]
    finally:
        rt.sandbox_pool = None
        await rt.aclose()
