"""One model step of an execution: assemble the request (system prompt, history converted
incrementally, tools), call the side's model and its fallbacks (streaming when the model
streams, with tool schemas adapted to what the endpoint accepts), emit the live events as
the reply grows, and store the reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal

from .. import observability as observe
from ..costs import call_cost
from ..exceptions import ProviderError
from ..providers.base import (
    ModelRequest,
    ModelResponse,
    ReasoningDelta,
    StreamEnd,
    TextDelta,
    ToolCallDelta,
)
from ..records import Message, ToolCall, new_id
from ..toolcalls import (
    LOAD_TOOLS_NAME,
    FenceSplitter,
    is_grammar_error,
    prepare_tools,
    recover_tool_calls,
    strip_thinking,
)
from .client_tools import unique_client_ids
from .compaction import compact_if_needed, over_threshold
from .context import THINKING_BLOCKS_KEY, clip, extend_context
from .guardrails import GuardrailTripped, OutputGuard, run_guardrails
from .output import OUTPUT_TOOL_NAME, UNCHANGED, PartialOutput
from .steps import StepProbe
from .turn_checks import output_tripped

if TYPE_CHECKING:
    from .execution_core import ExecutionCore
    from .side import SideSetup

__all__ = ["converted", "model_step"]

log = logging.getLogger("standardagents.engine")


@contextlib.asynccontextmanager

async def _closing(stream: Any) -> AsyncIterator[Any]:
    """``stream``, closed on the way out when it can be (async generators can)."""
    try:
        yield stream
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()


async def model_step(x: ExecutionCore, side: Literal["a", "b"], setup: SideSetup, ends_turn: bool = False) -> Message:
    ex = x.ex
    notes: dict[str, Any] = {}
    request = await _assemble(x, side, setup, notes)
    if x._meter is not None:
        x._meter.before_request(request)
    msg_id = new_id("msg_")
    reply = Message(thread_id=x.thread_id, role="assistant", content=None, id=msg_id, side=side if x.dual else None,
                    metadata={"executionId": x.record.id, "step": ex.step_count, **notes})
    x._partial = reply
    x._partial_text = []
    x._step = step = StepProbe()
    history = x.ex.message_history
    try:
        response = await _call_model(x, request, setup, reply)
    except GuardrailTripped as trip:
        return await output_tripped(x, setup, reply, trip)
    x._partial = None
    text = response.text or None
    if text and ("<" in text):
        visible, thought = strip_thinking(text)
        if thought:
            response.reasoning = "\n".join(p for p in (response.reasoning, thought) if p)
            text = visible or None
    out = x._output
    if text and not response.tool_calls and setup.toolbox.tools and (out is None or not out.matches(text)):
        recovered, remaining = recover_tool_calls(text, setup.toolbox.tools.keys())
        if recovered:
            response.tool_calls = [ToolCall(new_id("call_"), c.name, json.dumps(c.arguments)) for c in recovered]
            text = remaining.strip() or None
            reply.metadata["recoveredCalls"] = len(recovered)
            await _started_from_response(x, response, setup)
    reply.content = text
    reply.reasoning = response.reasoning
    if response.thinking_blocks:
        reply.metadata[THINKING_BLOCKS_KEY] = response.thinking_blocks
    reply.tool_calls = list(response.tool_calls) or None
    if x.client_tools is not None and reply.tool_calls:
        reply.tool_calls = unique_client_ids(reply.tool_calls, x.client_tools.names)
    reply.usage = response.usage
    if response.finish_reason == "length":
        reply.status = "truncated"
    if response.model:
        reply.metadata["model"] = response.model
    if response.metadata:  # what the provider ran itself (web search, generated images...), kept on the reply
        reply.metadata.update(response.metadata)
    step.finish(reply, response, request, history, x._used_model or setup.model, ex)
    cost = reply.cost = x._call_cost
    if cost is not None:
        x.cost = (x.cost or 0.0) + cost
    if x._meter is not None:
        x._meter.record(response.usage, cost)
    if response.usage is not None:
        u = response.usage.to_dict()
        for k, v in u.items():
            x.usage[k] = x.usage.get(k, 0) + v
        if x.bus.has_subscribers(x.thread_id):
            x.bus.emit("usage", x.thread_id, {"messageId": msg_id, "usage": u, "step": ex.step_count,
                                                    "cost": cost, "executionCost": x.cost})
    if setup.output_guardrails and text and not setup.model.stream:
        found = await run_guardrails(x.state, setup.output_guardrails, text, "output")
        if found is not None:
            return await output_tripped(x, setup, reply, GuardrailTripped(found, ""))
    extra: list[Message] = []
    verdict = out.judge(reply) if out is not None else None
    if verdict is not None:
        assert out is not None
        x._verdict = verdict
        if verdict.kind == "value":
            x.value = verdict.value
            reply.metadata["value"] = verdict.json_value
            ends_turn = not x.dual
            if x.bus.has_subscribers(x.thread_id):
                x.bus.emit("output", x.thread_id, {"messageId": msg_id, "value": verdict.json_value,
                                                         "side": reply.side})
        extra = [m for m in (out.tool_message(x.thread_id, verdict, reply.side),
                             out.retry_message(x.thread_id, verdict, reply.side)) if m is not None]
    final = None
    if ends_turn and not any(c.name != OUTPUT_TOOL_NAME for c in reply.tool_calls or ()) \
            and (verdict is None or verdict.kind == "value"):
        # The turn ends with this reply: record the execution's end in the same commit.
        final = x._finish_record("complete", None, outcome="response")
    stored = await x.rt.create_messages(x.state, [reply, *extra], execution=final)
    if final is not None:
        x._final_saved = True
    reply = stored[0]
    if text:
        x.last_text = text
    return reply


async def _assemble(x: ExecutionCore, side: Literal["a", "b"], setup: SideSetup,
                    notes: dict[str, Any] | None = None) -> ModelRequest:
    hooks = setup.hooks
    state = x.state
    system = setup.static_system
    if system is None:
        system = await x.rt.setups.render_system(setup, state)
    if hooks.has("after_system_message"):
        replaced = await hooks.transform("after_system_message", state, system)
        system = replaced if isinstance(replaced, str) else system
    history = x.ex.message_history
    if hooks.has("filter_messages"):
        snapshot = [m for m in history if not m.hidden]
        filtered = await hooks.transform("filter_messages", state, snapshot)
        msgs = [m if isinstance(m, Message) else Message.from_dict(m) for m in filtered]
        llm = x.rt.llm_cache.convert(msgs, side, x.dual)
    else:
        llm = converted(x, history, side)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    messages.extend(llm)
    if setup.prompt.compaction_threshold and over_threshold(setup, messages) and await compact_if_needed(x, setup, system):
        messages = [{"role": "system", "content": system}] if system else []
        messages.extend(converted(x, x.ex.message_history, side))
    if x.dual and (not llm or llm[-1]["role"] == "assistant"):
        messages.append({"role": "user", "content": "(continue)"})
    if setup.agent.memory is not None:  # what the agent recalls, placed before the new message
        found = await extend_context(x.rt, state, setup.agent, messages)
        if notes is not None:
            notes.update(found)
    if hooks.has("prefilter_llm_history"):
        messages = await hooks.transform("prefilter_llm_history", state, copy.deepcopy(messages))
    model = setup.model
    tools = setup.toolbox.offered
    meta: dict[str, Any] = {"threadId": x.thread_id, "agent": x.agent.name}
    if setup.ondemand:
        names = [LOAD_TOOLS_NAME, *x.ex.loaded_tools]
        tools = setup.tools_at(None, names)
        meta["toolNames"] = names
    client = x.client_tools
    tool_choice: str | dict[str, Any] | None = setup.prompt.tool_choice if setup.toolbox.offered else None
    parallel = setup.prompt.parallel_tool_calls
    if client is not None:
        tools = [*tools, *client.schemas]
        if client.tool_choice is not None and x._client_choice_pending:
            tool_choice = client.tool_choice
        if client.parallel_tool_calls is not None:
            parallel = client.parallel_tool_calls
        x._client_choice_pending = False
    request = ModelRequest(model=model.model, messages=messages, tools=tools,
                           tool_choice=tool_choice,
                           parallel_tool_calls=None if parallel else False,
                           max_tokens=setup.prompt.max_tokens or model.max_tokens,
                           temperature=setup.prompt.temperature if setup.prompt.temperature is not None else model.temperature,
                           top_p=model.top_p, extra_body=model.extra_body, timeout=model.timeout,
                           metadata=meta)
    if x.sampling:
        extra = x.sampling.get("extra_body")
        request = dataclasses.replace(request, **{k: v for k, v in x.sampling.items() if k != "extra_body"})
        if extra:
            request.extra_body = {**request.extra_body, **extra}
    return request


def converted(x: ExecutionCore, history: list[Message], side: str) -> list[dict[str, Any]]:
    """Model messages for the live history, converting only what was appended since
    the last step (the history is append-only unless ``history_version`` moved)."""
    cached = x._llm_state.get(side)
    version = x.ex.history_version
    if cached is None or cached[0] != version or cached[1] > len(history):
        llm = x.rt.llm_cache.convert(history, side, x.dual)
        x._llm_state[side] = (version, len(history), llm)
        return llm
    llm = cached[2]
    if cached[1] < len(history):
        llm.extend(x.rt.llm_cache.convert(history[cached[1]:], side, x.dual))
        x._llm_state[side] = (version, len(history), llm)
    return llm


async def _call_model(x: ExecutionCore, request: ModelRequest, setup: SideSetup, reply: Message) -> ModelResponse:
    """Call the side's model, then each fallback on a retriable error."""
    chain = [setup.model, *setup.fallbacks]
    last: ProviderError | None = None
    for i, model in enumerate(chain):
        if i:
            request.model = model.model
        gate = x.rt.model_gate  # under a shared rate limit the engine retries, each attempt counted
        provider = x.rt.setups.provider_for(model if gate is None else gate.unretried(model))
        x._used_model = model
        try:
            if not observe.observed:
                response = await _call_one(x, provider, model, request, setup, reply)
                x._call_cost = call_cost(model, response.usage, response.model)
                return response
            with observe.model_call(model, request, (chain[i - 1].name, last) if i else None) as call:
                x._step.traced(call)
                response = await _call_one(x, provider, model, request, setup, reply)
                # priced once here: the call's span carries it and the step reuses it
                x._call_cost = call_cost(model, response.usage, response.model)
                call.response(response, x._call_cost)
                return response
        except ProviderError as exc:
            last = exc
            if not exc.retriable or not exc.before_first_token or i == len(chain) - 1:
                raise
            x._step.failed(model, exc)
            log.warning("model %s failed (%s); trying fallback %s", model.name, exc, chain[i + 1].name)
    assert last is not None
    raise last


async def _call_one(x: ExecutionCore, provider: Any, model: Any, request: ModelRequest, setup: SideSetup, reply: Message) -> ModelResponse:
    """One model, with tool schemas adapted to what this endpoint accepts.

    A refusal of the tools' schema latches a looser level for (endpoint, model) and the
    request is sent again; later requests go out at the latched level at once."""
    latches = x.rt.capabilities
    endpoint = model.base_url or model.provider
    offered = request.tools
    out = x._output
    retries = 0
    while True:
        level = latches.level_for(endpoint, model.model) if offered else None
        request.tools = setup.tools_at(level, request.metadata.get("toolNames")) if offered else offered
        if offered and x.client_tools is not None and x.client_tools.schemas and level != "no_tools":
            theirs = x.client_tools.schemas
            request.tools = [*request.tools, *(theirs if level is None else prepare_tools(theirs, level))]
        if level == "no_tools":
            request.tool_choice = None
        if out is not None:
            out.shape(request, model, latches, level)
        gate = x.rt.model_gate  # a rate limit shared by the deployment's workers
        try:
            if gate is not None:
                await gate.acquire(model, request)
            if model.stream:
                return await _stream(x, provider, request, setup, reply)
            response = await provider.request(request)
            await _started_from_response(x, response, setup)
            return response
        except ProviderError as exc:
            if gate is not None and exc.status == 429:
                await gate.refused(model, exc.retry_after)
            delay = gate.retry_delay(model, exc, retries) if gate is not None else None
            if delay is not None:
                retries += 1
                log.warning("model %s failed (%s); retry %d through the shared rate limit", model.name, exc, retries)
                await asyncio.sleep(delay)
                continue
            if out is not None and exc.before_first_token and out.refused(exc, model, latches):
                x._step.failed(model, exc)
                log.warning("%s refused %s output for %s (%s); asking for it as %s", endpoint, out.mode, model.model,
                            exc, latches.output_mode_for(endpoint, model.model))
                continue
            if not offered or not exc.before_first_token or not is_grammar_error(exc):
                raise
            if latches.escalate(endpoint, model.model) is None:
                raise
            x._step.failed(model, exc)
            log.warning("%s refused the tool schemas of %s (%s); retrying with %s tools", endpoint, model.model,
                        exc, latches.level_for(endpoint, model.model))


async def _started_from_response(x: ExecutionCore, response: ModelResponse, setup: SideSetup,
                                 skip: set[int] | frozenset[int] = frozenset()) -> None:
    """``tool_call_started`` for calls known only once the reply is complete."""
    for i, call in enumerate(response.tool_calls):
        if i in skip:
            continue
        tool = setup.toolbox.tools.get(call.name)
        progress = None
        if tool is not None and tool.progress_argument:
            try:
                progress = json.loads(call.arguments or "{}").get(tool.progress_argument)
            except (ValueError, AttributeError):
                progress = None
        await _tool_started(x, call, setup, None if progress is None else str(progress))


async def _tool_started(x: ExecutionCore, call: ToolCall, setup: SideSetup, progress: str | None) -> None:
    x.bus.emit("tool_call_started", x.thread_id, {"id": call.id, "name": call.name, "progress": progress,
                                                        "arguments": clip(call.arguments, x.rt.event_detail_limit)})
    if setup.hooks.has("tool_call_started"):
        await setup.hooks.notify("tool_call_started", x.state, call, progress)


async def _stream(x: ExecutionCore, provider: Any, request: ModelRequest, setup: SideSetup, reply: Message) -> ModelResponse:
    bus = x.bus
    tid = x.thread_id
    side = reply.side
    text_parts: list[str] = []
    x._partial_text = text_parts
    calls: dict[int, dict[str, Any]] = {}
    listening = bus.has_subscribers(tid)
    out = x._output
    growing = x._growing = PartialOutput(out.spec) if out is not None and listening else None
    text_growing = growing if out is not None and out.mode != "tool" else None
    splitter = FenceSplitter()
    guard = None
    if setup.output_guardrails:
        def release(piece: str) -> None:
            if bus.has_subscribers(tid):
                bus.emit("message_chunk", tid, {"messageId": reply.id, "delta": piece, "side": side})

        guard = OutputGuard(x.state, setup.output_guardrails, release, setup.prompt.guardrail_chunk_size)
    # Closed as soon as this loop stops reading (a tripped guardrail, a stop, an error):
    # the connection is dropped at once, so the model stops generating (and billing).
    step = x._step
    async with _closing(provider.stream(request)) as deltas:
        async for delta in deltas:
            if step.ttft is None:
                step.first_token()
            if type(delta) is TextDelta:
                for kind, piece in splitter.feed(delta.text):
                    if kind == "text":
                        text_parts.append(piece)
                        if guard is not None:
                            await guard.feed(piece)
                        elif listening:
                            bus.emit("message_chunk", tid, {"messageId": reply.id, "delta": piece, "side": side})
                        if text_growing is not None and (grown := text_growing.feed(piece)) is not UNCHANGED:
                            bus.emit("output_delta", tid, {"messageId": reply.id, "value": grown, "side": side})
                    elif listening:
                        bus.emit("reasoning_chunk", tid, {"messageId": reply.id, "delta": piece, "side": side})
            elif type(delta) is ToolCallDelta:
                await _on_call_delta(x, delta, calls, setup)
            elif type(delta) is ReasoningDelta:
                if listening:
                    bus.emit("reasoning_chunk", tid, {"messageId": reply.id, "delta": delta.text, "side": side})
            elif type(delta) is StreamEnd:
                for kind, piece in splitter.flush():
                    if kind == "text":
                        text_parts.append(piece)
                        if guard is not None:
                            await guard.feed(piece)
                        elif listening:
                            bus.emit("message_chunk", tid, {"messageId": reply.id, "delta": piece, "side": side})
                    elif listening:
                        bus.emit("reasoning_chunk", tid, {"messageId": reply.id, "delta": piece, "side": side})
                if guard is not None:
                    await guard.check()
                response = delta.response
                await _started_from_response(x, response, setup, {i for i, slot in calls.items() if slot["started"]})
                return response
    raise ProviderError("the model's stream ended without a final response", retriable=True, before_first_token=not text_parts)


async def _on_call_delta(x: ExecutionCore, delta: ToolCallDelta, calls: dict[int, dict[str, Any]], setup: SideSetup) -> None:
    slot = calls.get(delta.index)
    if slot is None:
        slot = calls[delta.index] = {"id": delta.id or "", "name": delta.name or "", "args": [], "started": False}
    else:
        if delta.id:
            slot["id"] = delta.id
        if delta.name:
            slot["name"] = slot["name"] or delta.name
    if delta.arguments:
        slot["args"].append(delta.arguments)
        growing = x._growing
        if growing is not None and slot["name"] == OUTPUT_TOOL_NAME \
                and (grown := growing.feed(delta.arguments)) is not UNCHANGED:
            x.bus.emit("output_delta", x.thread_id, {"messageId": x._partial.id if x._partial else None,
                                                           "value": grown, "side": x._partial.side if x._partial else None})
    if slot["started"] or not slot["name"]:
        return
    tool = setup.toolbox.tools.get(slot["name"])
    prog_arg = tool.progress_argument if tool is not None else None
    if prog_arg is None:
        slot["started"] = True
        await _tool_started(x, ToolCall(slot["id"], slot["name"], "".join(slot["args"])), setup, None)
        return
    value = _completed_string_arg("".join(slot["args"]), prog_arg)
    if value is not None:
        slot["started"] = True
        await _tool_started(x, ToolCall(slot["id"], slot["name"], "".join(slot["args"])), setup, value)


def _completed_string_arg(partial: str, key: str) -> str | None:
    """The value of ``key`` once it has finished streaming in partial JSON text, else None."""
    needle = f'"{key}"'
    at = partial.find(needle)
    if at < 0:
        return None
    i = partial.find(":", at + len(needle))
    if i < 0:
        return None
    i += 1
    n = len(partial)
    while i < n and partial[i] in " \t\r\n":
        i += 1
    if i >= n:
        return None
    if partial[i] == '"':
        j = i + 1
        while j < n:
            c = partial[j]
            if c == "\\":
                j += 2
                continue
            if c == '"':
                try:
                    return str(json.loads(partial[i:j + 1]))
                except ValueError:
                    return None
            j += 1
        return None
    j = i
    while j < n and partial[j] not in ",}":
        j += 1
    if j >= n:
        return None
    return partial[i:j].strip()
