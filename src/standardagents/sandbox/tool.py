"""The built-in ``run_code`` tool: a code interpreter a prompt can list by name.

It is added to a project only when a prompt lists ``run_code`` and the project defines no
tool of that name, so projects that don't use it see no change.
"""

from __future__ import annotations

import json
from typing import Any

from ..definitions import ToolDefinition, define_tool

__all__ = ["RUN_CODE_TOOL", "run_code_tool"]

RUN_CODE_TOOL = "run_code"

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "The program. In Python the value of the last "
                 "expression is the result; in JavaScript/TypeScript the module's default export."},
        "language": {"type": "string", "enum": ["python", "javascript", "typescript"],
                     "description": "python (the standard library only), javascript or typescript"},
    },
    "required": ["code"],
    "additionalProperties": False,
}

_DESCRIPTION = ("Run a short program in an isolated sandbox and get its result and output. The "
                "thread's files are in the working directory (Python) or the `files` object "
                "(JavaScript); files written there are saved to the thread. No network access.")


async def _execute(state: Any, args: dict[str, Any]) -> str:
    result = await state.run_code(str(args["code"]), language=str(args.get("language") or "python"))
    data = result.to_dict()
    data.pop("logs")
    data["stdout"], data["stderr"] = result.stdout, result.stderr
    return json.dumps(data, default=str)


def run_code_tool() -> ToolDefinition:
    """A fresh definition of the built-in tool."""
    tool: ToolDefinition = define_tool(name=RUN_CODE_TOOL, description=_DESCRIPTION, parameters=_SCHEMA,
                                       execute=_execute)
    return tool
