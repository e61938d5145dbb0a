"""Remote A2A agents as tools: :func:`define_a2a_agent` makes a tool that sends the model's
message to an agent speaking A2A (any A2A server, our own A2A door included) and returns its
reply, so an agent can delegate to another one across the network.

Put it in ``agents/tools/*.py`` (it is a tool like any other) and list its name in a
prompt's ``tools``. The call sends one message with the ``a2a-sdk`` client (``pip install
'standardagents[a2a]'``) and waits for the task to end. The result is the reply's text,
then each data part as a JSON line; a task the remote agent leaves ``input-required`` is a
result saying what it asks and how to answer (call the tool again with the ``task_id`` and
``context_id`` it gives); a failed, rejected or cancelled task is an error result.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from typing import Any

from .definitions import ToolDefinition
from .definitions._base import check_snake_case
from .exceptions import DefinitionError
from .records import ToolResult

__all__ = ["define_a2a_agent"]

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "What to ask or tell the remote agent."},
        "context_id": {"type": "string",
                       "description": "Continue an earlier conversation with the agent (the context_id it gave)."},
        "task_id": {"type": "string",
                    "description": "Answer a task that waits for input (the task_id it gave), with its context_id."},
    },
    "required": ["message"],
    "additionalProperties": False,
}


def define_a2a_agent(
    name: str,
    *,
    url: str,
    description: str | None = None,
    headers: Mapping[str, str] | None = None,
    token_env: str | None = None,
    agent: str | None = None,
    timeout: float = 300.0,
    needs_approval: bool = False,
) -> ToolDefinition:
    """A tool named ``name`` that talks to the A2A agent at ``url`` (the URL its agent card
    is served under, e.g. ``https://host/a2a/helper``).

    ``headers`` are sent with every request; ``token_env`` names an environment variable
    holding a bearer token, read at each call (so no secret lives in the project). ``agent``
    picks a skill on a multi-agent card (sent as the message's ``agent`` metadata).
    ``timeout`` bounds the whole call in seconds. Problems are reported at once as a
    ``DefinitionError``."""
    problems: list[tuple[str, str]] = []
    bad = check_snake_case(name)
    if bad:
        problems.append(("name", bad))
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        problems.append(("url", "an http:// or https:// URL of the agent (where its agent card is served)"))
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        problems.append(("timeout", "a number of seconds greater than 0"))
    if token_env is not None and (not isinstance(token_env, str) or not token_env):
        problems.append(("token_env", "the name of an environment variable"))
    if problems:
        raise DefinitionError(problems, source=f"A2A agent {name!r}")
    fixed = dict(headers or {})

    async def call_agent(args: dict[str, Any]) -> ToolResult:
        sent = dict(fixed)
        if token_env is not None:
            token = os.environ.get(token_env)
            if not token:
                return ToolResult(status="error", error=f"the environment variable {token_env} (the token for the "
                                                        f"A2A agent {name!r}) is not set")
            sent["Authorization"] = f"Bearer {token}"
        try:
            return await _send(url, sent, timeout, agent, args)
        except Exception as exc:  # the remote agent is another party: its failure is the call's result
            return ToolResult(status="error", error=f"the A2A agent at {url} could not be reached or failed: "
                                                    f"{type(exc).__name__}: {exc}")

    text = description or f"Send a message to the remote agent {name!r} and get its reply."
    return ToolDefinition(name=name, description=text, parameters=_PARAMETERS, execute=call_agent, call_style="args",
                          needs_approval=needs_approval, timeout=float(timeout) + 5, origin="a2a", origin_detail=url)


async def _send(url: str, headers: dict[str, str], timeout: float, agent: str | None,  # noqa: ASYNC109 - the HTTP client's bound
                args: dict[str, Any]) -> ToolResult:
    try:
        import httpx
        from a2a.client import ClientConfig, create_client
        from a2a.helpers.proto_helpers import new_text_part
        from a2a.types import Message, Role, SendMessageRequest
    except ImportError:  # an optional extra
        return ToolResult(status="error", error="calling an A2A agent needs the a2a-sdk package: "
                                                "pip install 'standardagents[a2a]'")
    message = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[new_text_part(str(args["message"]))],
                      context_id=str(args.get("context_id") or ""), task_id=str(args.get("task_id") or ""))
    if agent is not None:
        message.metadata.update({"agent": agent})
    async with httpx.AsyncClient(headers=headers, timeout=timeout) as http:
        client = await create_client(url, client_config=ClientConfig(httpx_client=http, streaming=False))
        try:
            last: Any = None
            async for response in client.send_message(SendMessageRequest(message=message)):
                if response.HasField("task"):
                    last = response.task
                elif response.HasField("message"):
                    last = response.message
        finally:
            await client.close()
    if last is None:
        return ToolResult(status="error", error=f"the A2A agent at {url} sent no reply")
    if isinstance(last, Message):
        return ToolResult(status="success", result=_parts_text(last.parts))
    return _task_result(last)


def _parts_text(parts: Any) -> str:
    """Text parts joined, then each data part as a line of JSON."""
    from google.protobuf.json_format import MessageToDict

    texts = [part.text for part in parts if part.HasField("text")]
    data = [json.dumps(MessageToDict(part.data), ensure_ascii=False) for part in parts if part.HasField("data")]
    return "\n".join([t for t in texts if t] + data)


def _task_result(task: Any) -> ToolResult:
    from a2a.types import TaskState

    state = task.status.state
    said = _parts_text(task.status.message.parts) if task.status.HasField("message") else ""
    ids = f"context_id={task.context_id!r}, task_id={task.id!r}"
    if state == TaskState.TASK_STATE_COMPLETED:
        reply = "\n".join(t for t in (_parts_text(a.parts) for a in task.artifacts) if t) or said
        return ToolResult(status="success", result=f"{reply}\n(context_id={task.context_id!r}: pass it to continue "
                                                   "this conversation)")
    if state in (TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED):
        what = "input" if state == TaskState.TASK_STATE_INPUT_REQUIRED else "authentication"
        return ToolResult(status="success", result=f"The remote agent needs {what} before it can go on: "
                                                   f"{said or '(no details given)'}\nTo answer, call this tool "
                                                   f"again with your answer as the message and {ids}.")
    name = TaskState.Name(state).removeprefix("TASK_STATE_").lower().replace("_", "-")
    return ToolResult(status="error", error=f"the remote agent's task ended {name}: {said or 'no reason given'} "
                                            f"({ids})")
