"""Small agents projects written into a temporary folder, for the packed-agents tests."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

__all__ = ["QUICKSTART", "WRITER_FILES", "copy_quickstart", "write_files", "write_host"]

QUICKSTART = Path(__file__).resolve().parents[1] / "examples" / "quickstart"


def write_files(root: Path, files: dict[str, str]) -> Path:
    """Write ``{relative path: source}`` under ``root`` (sources are dedented)."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return root


def copy_quickstart(dest: Path) -> Path:
    shutil.copytree(QUICKSTART / "agents", dest / "agents", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


#: an agent that reaches a child agent with a parent hook, an include, a model with a
#: fallback, an effect named from tool code and a thread endpoint; plus things it does not reach
WRITER_FILES = {
    "agents/agents/writer.py": """
        from standardagents import define_agent

        writer = define_agent(
            name="writer",
            description="Writes short notes.",
            side_a={"prompt": "writer_prompt"},
            hooks=["stamp"],
            author="Ada Writer",
            license="MIT",
        )
    """,
    "agents/agents/reviewer.py": """
        from standardagents import define_agent

        reviewer = define_agent(
            name="reviewer",
            type="dual_ai",
            expose_as_tool=True,
            tool_description="Reviews a draft.",
            side_a={"prompt": "reviewer_prompt", "max_steps": 1},
            side_b={"prompt": "reviewer_prompt", "max_steps": 1},
            parent_hooks=[{"hook": "audit", "reason": "records every review", "stage": "before_parent"}],
        )
    """,
    "agents/agents/loner.py": """
        from standardagents import define_agent

        loner = define_agent(name="loner", side_a={"prompt": "loner_prompt"})
    """,
    "agents/prompts/writer_prompt.py": """
        from standardagents import define_prompt

        writer_prompt = define_prompt(
            name="writer_prompt",
            model="writer_model",
            prompt=[{"type": "text", "text": "Write."}, {"type": "include", "prompt": "house_style"}],
            tools=["word_count", "reviewer"],
        )
    """,
    "agents/prompts/house_style.py": """
        from standardagents import define_prompt

        house_style = define_prompt(name="house_style", prompt="Be brief.")
    """,
    "agents/prompts/reviewer_prompt.py": """
        from standardagents import define_prompt

        reviewer_prompt = define_prompt(name="reviewer_prompt", prompt="Review.")
    """,
    "agents/prompts/loner_prompt.py": """
        from standardagents import define_prompt

        loner_prompt = define_prompt(name="loner_prompt", prompt="Alone.", tools=["unrelated"])
    """,
    "agents/models/writer_model.py": """
        from standardagents import define_model

        writer_model = define_model(name="writer_model", provider="test", model="offline", fallbacks=["backup_model"])
    """,
    "agents/models/backup_model.py": """
        from standardagents import define_model

        backup_model = define_model(name="backup_model", provider="test", model="offline")
    """,
    "agents/tools/word_count.py": """
        from standardagents import define_tool


        @define_tool
        async def word_count(state, text: str = "one two") -> str:
            \"\"\"Count words and queue a digest.\"\"\"
            await state.schedule_effect("send_digest", {"words": len(text.split())})
            return str(len(text.split()))
    """,
    "agents/tools/unrelated.py": """
        from standardagents import define_tool


        @define_tool
        def unrelated() -> str:
            \"\"\"Not reached by the writer.\"\"\"
            return "unrelated"
    """,
    "agents/hooks/stamp.py": """
        from standardagents import define_hook


        @define_hook("after_thread_created", id="stamp")
        async def stamp(state):
            await state.set_env("stamped", True)
    """,
    "agents/hooks/audit.py": """
        from standardagents import define_hook


        @define_hook("tool_call_done", id="audit")
        async def audit(state, call, result):
            return None
    """,
    "agents/effects/send_digest.py": """
        from standardagents import define_effect


        async def _send(state, args):
            return None


        send_digest = define_effect("send_digest", "Send a digest", {"type": "object"}, _send)
    """,
    "agents/effects/cleanup.py": """
        from standardagents import define_effect


        async def _clean(state, args):
            return None


        cleanup = define_effect("cleanup", "Not reached", {"type": "object"}, _clean)
    """,
    "agents/api/status.get.py": """
        from standardagents import define_thread_endpoint


        @define_thread_endpoint
        async def status(request, state):
            return {"thread": state.thread_id}
    """,
}


def write_host(root: Path, extra: dict[str, str] | None = None) -> Path:
    """A host project with its own ``calculate`` tool (a name the quickstart package also uses)
    and a ``host_only`` tool, plus an agent using both."""
    files = {
        "agents/tools/calculate.py": """
            from standardagents import define_tool


            @define_tool
            def calculate(expression: str = "1") -> str:
                \"\"\"The host's own calculator.\"\"\"
                return "host calculate"
        """,
        "agents/tools/host_only.py": """
            from standardagents import define_tool


            @define_tool
            def host_only() -> str:
                \"\"\"Only the host has this.\"\"\"
                return "host only"
        """,
        "agents/prompts/host_prompt.py": """
            from standardagents import define_prompt

            host_prompt = define_prompt(name="host_prompt", prompt="Host.", tools=["calculate", "host_only"])
        """,
        "agents/agents/host_agent.py": """
            from standardagents import define_agent

            host_agent = define_agent(name="host_agent", side_a={"prompt": "host_prompt", "max_steps": 3})
        """,
    }
    files.update(extra or {})
    return write_files(root, files)
