"""Typed results: output_type on prompts and calls, each way of producing it, retries."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from engine_helpers import stub_model
from standardagents import define_agent, define_model, define_prompt, define_tool
from standardagents.exceptions import DefinitionError, StandardAgentsError
from standardagents.testing.anthropic_stub import AnthropicReply, AnthropicStub
from standardagents.testing.openai_stub import StubReply


class LineItem(BaseModel):
    description: str
    amount: float = Field(ge=0)


class Invoice(BaseModel):
    customer: str
    total: float = Field(ge=0)
    items: list[LineItem]


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Weather(TypedDict):
    city: str
    celsius: float


INVOICE = {"customer": "ACME", "total": 12.5, "items": [{"description": "bolts", "amount": 12.5}]}


@define_tool
def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: What to look up.
    """
    return f"facts about {topic}"


def agent(**side: Any) -> Any:
    return define_agent(name="clerk", side_a={"prompt": "main", **side})


def prompt(**fields: Any) -> Any:
    return define_prompt(name="main", prompt="You write invoices.", **fields)


@pytest.fixture
def anthropic_stub() -> Iterator[AnthropicStub]:
    with AnthropicStub() as server:
        yield server


# -- offline: the test model builds the value from the schema -------------------------------
async def test_the_test_model_answers_a_prompt_output_type_with_a_valid_instance(make_runtime):
    rt = await make_runtime(agent(), prompt(output_type=Invoice), define_model(name="default", provider="test", model="t"))
    result = await rt.run("clerk", "bill ACME")
    assert result.outcome == "response" and result.stop_reason == "complete"
    assert isinstance(result.value, Invoice) and isinstance(result.value.items[0], LineItem)
    final = (await rt.store.list_messages(result.thread_id))[-1]
    assert final.metadata["value"] == result.value.model_dump(mode="json")
    assert result.to_dict()["value"] == final.metadata["value"]


@pytest.mark.parametrize(("output_type", "check"), [
    (Point, lambda v: isinstance(v, Point)),
    (Weather, lambda v: isinstance(v, dict) and set(v) == {"city", "celsius"}),
    (list[Point], lambda v: isinstance(v, list) and all(isinstance(p, Point) for p in v)),
    (Point | Invoice, lambda v: isinstance(v, Point | Invoice)),
    ({"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}}, "required": ["n"]},
     lambda v: v == {"n": 3}),
])
async def test_a_call_output_type_of_each_kind_gives_its_value_offline(make_runtime, output_type, check):
    rt = await make_runtime(agent(), prompt(), define_model(name="default", provider="test", model="t"))
    result = await rt.run("clerk", "go", output_type=output_type)
    assert result.outcome == "response", result.error
    assert check(result.value)


async def test_a_bad_output_type_is_refused_before_anything_is_stored(make_runtime):
    rt = await make_runtime(agent(), prompt(), define_model(name="default", provider="test", model="t"))
    with pytest.raises(StandardAgentsError, match="not a valid JSON Schema"):
        await rt.run("clerk", "go", output_type={"type": "no-such-type"})
    with pytest.raises(StandardAgentsError, match="output_type must be a type"):
        await rt.run("clerk", "go", output_type="Invoice")
    assert await rt.store.list_threads() == []


def test_a_prompt_with_a_bad_output_type_does_not_validate():
    with pytest.raises(DefinitionError, match="output_type"):
        define_prompt(name="main", prompt="x", output_type={"type": 5})
    with pytest.raises(DefinitionError, match="output_retries"):
        define_prompt(name="main", prompt="x", output_retries=-1)


# -- OpenAI-compatible: native response_format ----------------------------------------------
@pytest.mark.parametrize("stream", [True, False])
async def test_openai_endpoint_gets_a_json_schema_response_format(stub, make_runtime, stream):
    stub.queue(json.dumps(INVOICE))
    rt = await make_runtime(agent(), prompt(), stub_model(stub, stream=stream))
    result = await rt.run("clerk", "bill ACME", output_type=Invoice)
    assert result.value == Invoice.model_validate(INVOICE)
    fmt = stub.requests[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "Invoice"
    assert fmt["json_schema"]["schema"]["required"] == ["customer", "total", "items"]
    assert "tools" not in stub.requests[0]


async def test_a_list_output_is_wrapped_in_an_object_for_the_endpoint(stub, make_runtime):
    stub.queue(json.dumps({"result": [{"x": 1, "y": 2}, {"x": 3, "y": 4}]}))
    rt = await make_runtime(agent(), prompt(), stub_model(stub))
    result = await rt.run("clerk", "two points", output_type=list[Point])
    assert result.value == [Point(1, 2), Point(3, 4)]
    schema = stub.requests[0]["response_format"]["json_schema"]["schema"]
    assert schema["type"] == "object" and schema["properties"]["result"]["type"] == "array"


async def test_tools_still_run_before_the_typed_answer(stub, make_runtime):
    stub.queue(StubReply(tool_calls=[("lookup", json.dumps({"topic": "ACME"}))]), json.dumps(INVOICE))
    rt = await make_runtime(agent(), prompt(tools=["lookup"]), lookup, stub_model(stub))
    result = await rt.run("clerk", "bill ACME", output_type=Invoice)
    assert result.value.customer == "ACME"
    assert [m.role for m in await rt.store.list_messages(result.thread_id)] == ["user", "assistant", "tool", "assistant"]


# -- retries with the exact errors ----------------------------------------------------------
async def test_an_invalid_answer_is_sent_back_with_its_errors_then_accepted(stub, make_runtime):
    bad = {**INVOICE, "total": -3}
    stub.queue(json.dumps(bad), json.dumps(INVOICE))
    rt = await make_runtime(agent(), prompt(), stub_model(stub))
    result = await rt.run("clerk", "bill ACME", output_type=Invoice)
    assert result.outcome == "response" and result.value.total == 12.5
    retry = stub.requests[1]["messages"][-1]
    assert retry["role"] == "user" and "total: Input should be greater than or equal to 0" in retry["content"]
    assert stub.requests[1]["messages"][-2] == {"role": "assistant", "content": json.dumps(bad)}
    stored = await rt.store.list_messages(result.thread_id)
    assert [(m.role, m.silent) for m in stored] == [("user", False), ("assistant", False), ("user", True), ("assistant", False)]


async def test_past_the_retry_budget_the_turn_ends_output_invalid_with_the_errors(stub, make_runtime):
    stub.queue("not json at all", json.dumps({"customer": "ACME"}))
    rt = await make_runtime(agent(), prompt(output_retries=1), stub_model(stub))
    sub = rt.subscribe()
    result = await rt.run("clerk", "bill ACME", output_type=Invoice)
    assert (result.stop_reason, result.outcome, result.value) == ("error", "output_invalid", None)
    assert result.payload == {"errors": ["total: Field required", "items: Field required"]}
    assert "after 2 attempts" in (result.error or "")
    assert len(stub.requests) == 2
    events = []
    while not sub.queue.empty():
        events.append(sub.queue.get_nowait())
    done = [e for e in events if e.type == "done"][-1]
    assert done.data["outcome"] == "output_invalid" and done.data["payload"]["errors"]


async def test_a_call_output_retries_overrides_the_prompt(stub, make_runtime):
    stub.queue("nope")
    rt = await make_runtime(agent(), prompt(output_retries=5), stub_model(stub))
    result = await rt.run("clerk", "x", output_type=Point, output_retries=0)
    assert result.outcome == "output_invalid" and len(stub.requests) == 1


# -- refusals fall back and are remembered --------------------------------------------------
REFUSED_FORMAT = StubReply(error_status=400, error_body={"error": {
    "message": "response_format json_schema is not supported by this server", "type": "invalid_request_error"}})
REFUSED_TOOLS = StubReply(error_status=400, error_body={"error": {
    "message": "this model does not support tools", "type": "invalid_request_error"}})


async def test_a_refused_response_format_falls_back_to_the_output_tool_and_is_latched(stub, make_runtime):
    stub.queue(REFUSED_FORMAT, StubReply(tool_calls=[("final_result", json.dumps(INVOICE))]),
               StubReply(tool_calls=[("final_result", json.dumps(INVOICE))]))
    rt = await make_runtime(agent(), prompt(), stub_model(stub))
    first = await rt.run("clerk", "bill ACME", output_type=Invoice)
    assert first.value.customer == "ACME"
    assert "response_format" in stub.requests[0] and "response_format" not in stub.requests[1]
    assert [t["function"]["name"] for t in stub.requests[1]["tools"]] == ["final_result"]
    messages = await rt.store.list_messages(first.thread_id)
    assert [m.role for m in messages] == ["user", "assistant", "tool"]
    assert messages[1].metadata["value"] == INVOICE and messages[2].tool_status == "success"
    second = await rt.run("clerk", "again", output_type=Invoice)
    assert second.value.customer == "ACME" and len(stub.requests) == 3
    assert "response_format" not in stub.requests[2]
    assert json.loads(rt.capabilities.export_capabilities())["output"] == {stub.base_url: {"stub-model": "tool"}}


async def test_a_model_without_tools_or_formats_gets_a_prompted_answer_repaired(stub, make_runtime):
    answer = "Sure! Here it is:\n```json\n{'x': 4, 'y': 5,}\n```"
    stub.queue(REFUSED_FORMAT, REFUSED_TOOLS, answer)
    rt = await make_runtime(agent(), prompt(), stub_model(stub))
    result = await rt.run("clerk", "a point", output_type=Point)
    assert result.value == Point(4, 5)
    system = stub.requests[2]["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You write invoices.")
    assert '"required":["x","y"]' in system["content"]
    assert "tools" not in stub.requests[2] and "response_format" not in stub.requests[2]


async def test_the_output_tool_is_retried_with_its_errors_as_the_tool_result(stub, make_runtime):
    rt = await make_runtime(agent(), prompt(), stub_model(stub))
    rt.capabilities.latch_output(stub.base_url, "stub-model", "tool")
    stub.queue("I think x is 1", StubReply(tool_calls=[("final_result", '{"x": "one", "y": 2}')]),
               StubReply(tool_calls=[("final_result", '{"x": 1, "y": 2}')]))
    result = await rt.run("clerk", "a point", output_type=Point, output_retries=2)
    assert result.value == Point(1, 2)
    assert "call the tool final_result" in stub.requests[1]["messages"][-1]["content"]
    last = stub.requests[2]["messages"][-1]
    assert last["role"] == "tool" and "x: Input should be a valid integer" in last["content"]


# -- Anthropic: tool-forced output ----------------------------------------------------------
@pytest.mark.parametrize("stream", [True, False])
async def test_anthropic_is_forced_to_call_the_output_tool(anthropic_stub, make_runtime, monkeypatch, stream):
    monkeypatch.setenv("STANDARDAGENTS_TEST_ANTHROPIC_KEY", "sk-test")
    anthropic_stub.queue(AnthropicReply(tool_calls=[("final_result", json.dumps(INVOICE))]))
    model = define_model(name="default", provider="anthropic", model="claude-stub", base_url=anthropic_stub.base_url,
                         api_key_env="STANDARDAGENTS_TEST_ANTHROPIC_KEY", max_retries=0, stream=stream)
    rt = await make_runtime(agent(), prompt(output_type=Invoice), model)
    result = await rt.run("clerk", "bill ACME")
    assert result.value == Invoice.model_validate(INVOICE)
    sent = anthropic_stub.requests[0]
    assert sent["tool_choice"] == {"type": "tool", "name": "final_result"}
    assert sent["tools"][0]["input_schema"]["required"] == ["customer", "total", "items"]


async def test_anthropic_with_other_tools_must_call_some_tool(anthropic_stub, make_runtime, monkeypatch):
    monkeypatch.setenv("STANDARDAGENTS_TEST_ANTHROPIC_KEY", "sk-test")
    anthropic_stub.queue(AnthropicReply(tool_calls=[("lookup", '{"topic": "ACME"}')]),
                         AnthropicReply(tool_calls=[("final_result", json.dumps(INVOICE))]))
    model = define_model(name="default", provider="anthropic", model="claude-stub", base_url=anthropic_stub.base_url,
                         api_key_env="STANDARDAGENTS_TEST_ANTHROPIC_KEY", max_retries=0)
    rt = await make_runtime(agent(), prompt(output_type=Invoice, tools=["lookup"]), lookup, model)
    result = await rt.run("clerk", "bill ACME")
    assert result.value.customer == "ACME"
    assert anthropic_stub.requests[0]["tool_choice"] == {"type": "any"}
    assert [t["name"] for t in anthropic_stub.requests[0]["tools"]] == ["lookup", "final_result"]


# -- REST: a JSON Schema in the message body, the value in ?wait=true ------------------------
async def test_rest_message_with_an_output_type_returns_the_value(client: httpx.AsyncClient, actors: Any):
    headers = actors.auth("alice")
    tid = (await client.post("/api/threads", json={"agent": "helper"}, headers=headers)).json()["id"]
    schema = {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]}
    r = await client.post(f"/api/threads/{tid}/messages?wait=true", json={"content": "1+2", "outputType": schema},
                          headers=headers)
    assert r.status_code == 200, r.text
    assert r.json()["value"] == {"sum": 1} and r.json()["outcome"] == "response"
    bad = await client.post(f"/api/threads/{tid}/messages?wait=true", json={"content": "x", "outputType": {"type": 3}},
                            headers=headers)
    assert bad.status_code == 422 and "outputType" in bad.json()["error"]["message"]


# -- streaming partial objects --------------------------------------------------------------
def _drain(sub: Any) -> list[Any]:
    events = []
    while not sub.queue.empty():
        events.append(sub.queue.get_nowait())
    return events


async def test_partial_objects_stream_as_output_delta_then_the_validated_value(stub, make_runtime):
    stub.queue(StubReply(text=json.dumps(INVOICE), chunk_size=5))
    rt = await make_runtime(agent(), prompt(), stub_model(stub))
    sub = rt.subscribe()
    result = await rt.run("clerk", "bill ACME", output_type=Invoice)
    events = _drain(sub)
    partials = [e.data["value"] for e in events if e.type == "output_delta"]
    assert len(partials) >= 4
    assert partials[0] != partials[-1] and partials[-1] == INVOICE
    assert all(isinstance(p, dict) and set(p) <= set(INVOICE) for p in partials)
    assert len({json.dumps(p, sort_keys=True) for p in partials}) == len(partials)
    final = [e.data for e in events if e.type == "output"]
    reply = (await rt.store.list_messages(result.thread_id))[-1]
    assert final == [{"messageId": reply.id, "value": INVOICE, "side": None}]
    kinds = [e.type for e in events]
    assert kinds.index("output") > max(i for i, k in enumerate(kinds) if k == "output_delta")


async def test_output_tool_arguments_stream_as_partial_objects(stub, make_runtime):
    rt = await make_runtime(agent(), prompt(), stub_model(stub))
    rt.capabilities.latch_output(stub.base_url, "stub-model", "tool")
    stub.queue(StubReply(tool_calls=[("final_result", json.dumps(INVOICE))], chunk_size=6))
    sub = rt.subscribe()
    result = await rt.run("clerk", "bill ACME", output_type=Invoice)
    partials = [e.data["value"] for e in _drain(sub) if e.type == "output_delta"]
    assert len(partials) >= 2 and partials[-1] == INVOICE and result.value.customer == "ACME"


# -- dual_ai sides, subagents, documents -----------------------------------------------------
class Verdict(BaseModel):
    approved: bool
    reason: str


async def test_each_dual_ai_side_answers_in_its_own_type(make_runtime):
    debate = define_agent(name="debate", type="dual_ai", max_session_turns=2,
                          side_a={"prompt": "proposer"}, side_b={"prompt": "judge"})
    rt = await make_runtime(debate, define_prompt(name="proposer", prompt="Propose.", output_type=Point),
                            define_prompt(name="judge", prompt="Judge.", output_type=Verdict),
                            define_model(name="default", provider="test", model="t"))
    result = await rt.run("debate", "go")
    assert result.outcome == "max_session_turns" and isinstance(result.value, Verdict)
    values = [(m.side, m.metadata.get("value")) for m in await rt.store.list_messages(result.thread_id)
              if m.role == "assistant"]
    assert values == [("a", {"x": 1, "y": 1}), ("b", {"approved": True, "reason": "reason"})]


async def test_a_subagent_typed_value_reaches_the_parent_as_json(make_runtime):
    child = define_agent(name="reviewer", type="dual_ai", max_session_turns=2, expose_as_tool=True,
                         tool_description="Review a proposal.", primary=False,
                         side_a={"prompt": "proposer"}, side_b={"prompt": "judge"})
    boss = define_agent(name="boss", side_a={"prompt": "boss_prompt"})
    rt = await make_runtime(boss, child, define_prompt(name="boss_prompt", prompt="Delegate.", tools=["reviewer"]),
                            define_prompt(name="proposer", prompt="Propose."),
                            define_prompt(name="judge", prompt="Judge.", output_type=Verdict),
                            define_model(name="default", provider="test", model="t"))
    result = await rt.run("boss", "review this")
    assert result.stop_reason == "complete"
    [tool] = [m for m in await rt.store.list_messages(result.thread_id) if m.role == "tool"]
    body = json.loads(tool.content or "")
    assert body["value"] == {"approved": True, "reason": "reason"}
    [link] = await rt.store.list_subagents(result.thread_id)
    assert link.result["value"] == body["value"]


def test_export_and_validate_say_the_output_type_is_not_carried(tmp_path):
    from typer.testing import CliRunner

    from standardagents.cli import app

    files = {
        "agents/agents/clerk.py": "from standardagents import define_agent\n"
                                  "clerk = define_agent(name='clerk', side_a={'prompt': 'clerk_prompt'})\n",
        "agents/prompts/clerk_prompt.py": "from standardagents import define_prompt\n"
                                          "clerk_prompt = define_prompt(name='clerk_prompt', prompt='Bill.', "
                                          "output_type={'type': 'object', 'properties': {'n': {'type': 'integer'}}})\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    runner = CliRunner()
    checked = runner.invoke(app, ["validate", str(tmp_path)])
    assert checked.exit_code == 0 and "output_type, which `export` does not carry" in checked.output
    exported = runner.invoke(app, ["export", str(tmp_path), "--agent", "clerk"])
    assert exported.exit_code == 0, exported.output
    assert "output_type is not carried" in exported.stderr
    assert "n" not in json.loads(exported.stdout).get("prompt", [{}])[0]


# -- the OpenAI door: response_format through the official client ----------------------------
class Sum(BaseModel):
    a: int
    b: int
    total: int


async def test_openai_door_answers_a_response_format_with_the_typed_value(live_server: Any):
    import openai

    async with openai.AsyncOpenAI(base_url=f"{live_server.base_url}/v1", api_key=live_server.token,
                                  max_retries=0) as client:
        parsed = await client.chat.completions.parse(model="helper", response_format=Sum,
                                                     messages=[{"role": "user", "content": "add 1 and 2"}])
        assert isinstance(parsed.choices[0].message.parsed, Sum)
        loose = await client.chat.completions.create(model="helper", response_format={"type": "json_object"},
                                                     messages=[{"role": "user", "content": "add 1 and 2"}])
        assert isinstance(json.loads(loose.choices[0].message.content or ""), dict)
        with pytest.raises(openai.UnprocessableEntityError):
            await client.chat.completions.create(model="helper", messages=[{"role": "user", "content": "x"}],
                                                 response_format={"type": "json_schema", "json_schema": {
                                                     "name": "bad", "schema": {"type": 7}}})
