"""``python -m standardagents.sandbox warm``: fetch Pyodide into the sandbox cache and run
one Python and one JavaScript snippet, so later runs (and tests) start offline."""

from __future__ import annotations

import asyncio
import sys

from .pool import SandboxPool
from .process import SandboxUnavailable, warm_cache


async def _check() -> int:
    pool = SandboxPool(size=0)
    try:
        py, _ = await pool.run("import sys; sys.version_info[:2]")
        js, _ = await pool.run("export default 40 + 2;", language="javascript")
    finally:
        await pool.close()
    if py.status != "completed" or js.status != "completed":
        print(f"sandbox check failed: python {py.status} {py.error}, javascript {js.status} {js.error}",
              file=sys.stderr)
        return 1
    print(f"sandbox ready: Python {'.'.join(map(str, py.result))} on Pyodide, JavaScript gives {js.result}")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] != ["warm"]:
        print("usage: python -m standardagents.sandbox warm", file=sys.stderr)
        return 2
    try:
        print(f"Pyodide cached in {warm_cache()}")
        return asyncio.run(_check())
    except SandboxUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
