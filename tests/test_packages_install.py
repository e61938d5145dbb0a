"""A packed wheel installed into a fresh virtual environment, beside a host project.

The environment sees the development environment's site-packages (through a ``.pth`` file that
adds it as a site directory, so its editable install of this project and every dependency are
there and nothing is downloaded); pip installs the packed wheel into it, and a script run there
drives a real ``Runtime``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
import venv
from pathlib import Path

import pytest

from packages_fixtures import copy_quickstart, write_host
from standardagents.packages import pack_project

SCRIPT = textwrap.dedent("""
    import asyncio
    import json
    import sys

    from standardagents import Runtime
    from standardagents.packages import load_project_with_packages

    PID = "standardagent-assistant"


    async def tools_used(rt, agent):
        result = await rt.run(agent, "what is 2 + 2, what time is it, and what does only the host have?")
        messages = await rt.store.list_messages(result.thread_id)
        return result.outcome, {m.name: m.content for m in messages if m.role == "tool"}


    async def main():
        registry = load_project_with_packages(sys.argv[1])
        info = registry.packages[PID]
        tool_module = info.module_name + ".definitions.tools.calculate"
        report = {
            "source": info.source,
            "dist": info.dist_name,
            "module_file": info.module.__file__,
            "imported_before_use": tool_module in sys.modules,
            "host_sees_internal_tool": registry.has("tools", "current_time"),
            "host_sees_internal_prompt": registry.has("prompts", "assistant_prompt"),
            "package_sees_host_tool": registry.has("tools", "host_only", PID),
        }
        rt = await Runtime.open(registry, database_url="sqlite:///:memory:")
        try:
            report["entry"] = await tools_used(rt, "assistant")
            report["imported_after_use"] = tool_module in sys.modules
            report["host"] = await tools_used(rt, "host_agent")
            signature = (await registry.aget("tools", "calculate", PID)).package
            report["signature"] = dict(signature)
        finally:
            await rt.aclose()
        print(json.dumps(report))


    asyncio.run(main())
""")


def _run(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, capture_output=True, text=True, check=False, timeout=120, **kwargs)  # type: ignore[call-overload]
    assert proc.returncode == 0, f"{args[:4]} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Pack the quickstart agent, install its wheel into a fresh venv, run the script there."""
    tmp = tmp_path_factory.mktemp("install")
    wheel = pack_project(copy_quickstart(tmp / "qs"), "assistant", out_dir=tmp / "out", wheel=True)
    env_dir = tmp / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    dev_site = sysconfig.get_paths()["purelib"]
    (purelib / "_dev_dependencies.pth").write_text(f"import site; site.addsitedir({dev_site!r})\n", encoding="utf-8")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index"]
    _run([*pip, str(wheel)])
    host = write_host(tmp / "host")
    (tmp / "check.py").write_text(SCRIPT, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "STANDARDAGENTS_", "PYTHON"))}
    out = _run([str(python), str(tmp / "check.py"), str(host)], cwd=str(tmp), env=env)
    report: dict = json.loads(out.stdout.strip().splitlines()[-1])
    report["purelib"] = str(purelib)
    return report


def test_the_wheel_is_discovered_as_an_installed_package(installed: dict) -> None:
    assert (installed["source"], installed["dist"]) == ("installed", "standardagent-assistant")
    assert installed["module_file"].startswith(installed["purelib"])
    assert installed["signature"]["source"] == "installed"


def test_the_entry_agent_runs_with_its_own_internals(installed: dict) -> None:
    outcome, tools = installed["entry"]
    assert outcome == "response"
    assert tools["calculate"] == "2 + 2 = 4"
    assert "UTC" in tools["current_time"]


def test_the_host_runs_its_own_tool_of_the_same_name(installed: dict) -> None:
    outcome, tools = installed["host"]
    assert outcome == "response"
    assert tools == {"calculate": "host calculate", "host_only": "host only"}


def test_the_host_cannot_see_package_internals(installed: dict) -> None:
    assert installed["host_sees_internal_tool"] is False
    assert installed["host_sees_internal_prompt"] is False


def test_the_package_cannot_see_host_tools(installed: dict) -> None:
    assert installed["package_sees_host_tool"] is False


def test_the_installed_tool_module_loads_only_when_used(installed: dict) -> None:
    assert (installed["imported_before_use"], installed["imported_after_use"]) == (False, True)
