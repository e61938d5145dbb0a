"""Cost: each call priced from the genai-prices data or a model's own prices, summed and reported."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import httpx
import pytest
from genai_prices import data_snapshot

from engine_helpers import stub_model
from standardagents import define_agent, define_model, define_prompt
from standardagents.costs import call_cost, manual_cost
from standardagents.exceptions import DefinitionError
from standardagents.records import Usage
from standardagents.testing.anthropic_stub import AnthropicReply, AnthropicStub
from standardagents.testing.openai_stub import StubReply


def listed(model: str, provider: str) -> dict[str, Any]:
    """The price data's per-million prices of a model (base tier)."""
    _, info = data_snapshot.get_snapshot().find_provider_model(model, None, provider, None)
    prices = info.get_prices(datetime.now(tz=UTC)).__dict__
    return {k: getattr(v, "base", v) for k, v in prices.items() if v is not None}


def test_openai_cost_follows_the_price_data_with_cached_input():
    p = listed("gpt-4o", "openai")
    usage = Usage(prompt_tokens=12_000, completion_tokens=3_000, total_tokens=15_000, cached_tokens=2_000)
    expected = (10_000 * p["input_mtok"] + 2_000 * p["cache_read_mtok"] + 3_000 * p["output_mtok"]) / Decimal(10**6)
    assert p["cache_read_mtok"] < p["input_mtok"]
    assert call_cost(define_model(name="m", provider="openai", model="gpt-4o"), usage) == pytest.approx(float(expected))
    official = define_model(name="m", provider="openai", model="gpt-4o", base_url="https://api.openai.com/v1")
    assert call_cost(official, usage) == pytest.approx(float(expected))


def test_anthropic_cost_counts_cache_reads_and_writes_at_their_prices():
    p = listed("claude-sonnet-4-5", "anthropic")
    usage = Usage(prompt_tokens=10_000, completion_tokens=500, total_tokens=10_500, cached_tokens=2_000,
                  cache_write_tokens=1_000)
    expected = (7_000 * p["input_mtok"] + 2_000 * p["cache_read_mtok"] + 1_000 * p["cache_write_mtok"]
                + 500 * p["output_mtok"]) / Decimal(10**6)
    model = define_model(name="c", provider="anthropic", model="claude-sonnet-4-5")
    assert call_cost(model, usage) == pytest.approx(float(expected))


@pytest.mark.parametrize(("provider", "model"), [("openai", "gpt-4o"), ("openai", "gpt-4o-mini"),
                                                 ("anthropic", "claude-sonnet-4-5"), ("anthropic", "claude-3-5-haiku")])
def test_call_cost_equals_the_price_data_own_calculation(provider, model):
    import genai_prices

    usage = Usage(prompt_tokens=50_000, completion_tokens=4_000, total_tokens=54_000, cached_tokens=10_000,
                  cache_write_tokens=5_000 if provider == "anthropic" else 0)
    theirs = genai_prices.calc_price(genai_prices.Usage(
        input_tokens=50_000, output_tokens=4_000, cache_read_tokens=10_000,
        cache_write_tokens=usage.cache_write_tokens or None), model, provider_id=provider)
    ours = call_cost(define_model(name="m", provider=provider, model=model), usage)
    assert ours == pytest.approx(float(theirs.total_price), rel=1e-12)


def test_the_reported_model_name_is_priced_before_the_alias():
    p = listed("gpt-4o-mini", "openai")
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=0, total_tokens=1_000_000)
    model = define_model(name="alias", provider="openai", model="my-deployment")
    assert call_cost(model, usage, "gpt-4o-mini") == pytest.approx(float(p["input_mtok"]))


@pytest.mark.parametrize("model", [
    define_model(name="m", provider="openai", model="no-such-model-anywhere"),
    define_model(name="m", provider="openai", model="gpt-4o", base_url="http://127.0.0.1:11434/v1"),
    define_model(name="m", provider="test", model="test"),
])
def test_an_unknown_price_is_none_not_zero(model):
    assert call_cost(model, Usage(prompt_tokens=100, completion_tokens=10, total_tokens=110)) is None


def test_a_model_own_prices_override_the_data():
    model = define_model(name="m", provider="openai", model="gpt-4o",
                         prices={"input": 1.0, "output": 4.0, "cached_input": 0.5})
    usage = Usage(prompt_tokens=3_000_000, completion_tokens=1_000_000, total_tokens=4_000_000, cached_tokens=1_000_000)
    assert call_cost(model, usage) == pytest.approx(2.0 + 0.5 + 4.0)
    assert manual_cost({"input": 2, "output": 2}, Usage(prompt_tokens=500_000, cache_write_tokens=500_000)) == 1.0
    with pytest.raises(DefinitionError, match="prices"):
        define_model(name="m", provider="openai", model="x", prices={"input": -1, "output": 1})


PRICED = {"input": 2.0, "output": 8.0, "cached_input": 1.0}
USAGE = {"prompt_tokens": 1_000, "completion_tokens": 500, "total_tokens": 1_500,
         "prompt_tokens_details": {"cached_tokens": 400}}
ONE_CALL = (600 * 2.0 + 400 * 1.0 + 500 * 8.0) / 1e6


async def test_each_reply_records_its_cost_and_the_turn_sums_them(stub, make_runtime):
    stub.queue(StubReply(text="one", usage=USAGE), StubReply(text="two", usage=USAGE))
    rt = await make_runtime(define_agent(name="a", side_a={"prompt": "p", "stop_on_response": False, "max_steps": 2}),
                            define_prompt(name="p", prompt="x"), stub_model(stub, prices=PRICED))
    sub = rt.subscribe()
    result = await rt.run("a", "go")
    assert result.cost == pytest.approx(2 * ONE_CALL)
    replies = [m for m in await rt.store.list_messages(result.thread_id) if m.role == "assistant"]
    assert [m.cost for m in replies] == [pytest.approx(ONE_CALL)] * 2
    events = []
    while not sub.queue.empty():
        events.append(sub.queue.get_nowait())
    usage_events = [e.data for e in events if e.type == "usage"]
    assert [e["cost"] for e in usage_events] == [pytest.approx(ONE_CALL)] * 2
    assert usage_events[-1]["executionCost"] == pytest.approx(2 * ONE_CALL)
    record = (await rt.store.list_executions(thread_id=result.thread_id))[0]
    assert record.state["cost"] == pytest.approx(2 * ONE_CALL) and record.state["usage"]["prompt_tokens"] == 2_000


async def test_an_unpriced_turn_has_no_cost(stub, make_runtime):
    stub.queue(StubReply(text="one", usage=USAGE))
    rt = await make_runtime(define_agent(name="a", side_a={"prompt": "p"}), define_prompt(name="p", prompt="x"),
                            stub_model(stub))
    result = await rt.run("a", "go")
    assert result.cost is None and result.usage["prompt_tokens"] == 1_000
    assert (await rt.store.list_messages(result.thread_id))[-1].cost is None


async def test_the_turn_cost_limit_stops_the_next_request(stub, make_runtime):
    stub.queue(StubReply(text="one", usage=USAGE), StubReply(text="two", usage=USAGE))
    rt = await make_runtime(define_agent(name="a", side_a={"prompt": "p", "stop_on_response": False, "max_steps": 5}),
                            define_prompt(name="p", prompt="x"), stub_model(stub, prices=PRICED))
    result = await rt.run("a", "go", usage_limits={"cost_usd": ONE_CALL * 1.5})
    assert result.outcome == "usage_limit" and result.payload["limit"] == "cost_usd"
    assert len(stub.requests) == 2 and result.cost == pytest.approx(2 * ONE_CALL)


async def test_the_thread_cost_limit_counts_earlier_turns(stub, make_runtime):
    stub.queue(StubReply(text="one", usage=USAGE))
    rt = await make_runtime(define_agent(name="a", side_a={"prompt": "p"}, usage_limits={"thread_cost_usd": ONE_CALL}),
                            define_prompt(name="p", prompt="x"), stub_model(stub, prices=PRICED))
    first = await rt.run("a", "go")
    second = await rt.send(first.thread_id, "more")
    assert second.outcome == "usage_limit" and second.payload["limit"] == "thread_cost_usd"
    assert len(stub.requests) == 1


async def test_anthropic_cache_writes_are_read_and_priced(make_runtime, monkeypatch):
    monkeypatch.setenv("STANDARDAGENTS_TEST_ANTHROPIC_KEY", "sk-test")
    async with AnthropicStub() as server:
        server.queue(AnthropicReply(text="hi", usage={"input_tokens": 100, "cache_read_input_tokens": 300,
                                                      "cache_creation_input_tokens": 600, "output_tokens": 50}))
        model = define_model(name="default", provider="anthropic", model="claude-stub", base_url=server.base_url,
                             api_key_env="STANDARDAGENTS_TEST_ANTHROPIC_KEY", max_retries=0,
                             prices={"input": 3, "output": 15, "cached_input": 0.3, "cache_write": 3.75})
        rt = await make_runtime(define_agent(name="a", side_a={"prompt": "p"}), define_prompt(name="p", prompt="x"), model)
        result = await rt.run("a", "go")
    reply = (await rt.store.list_messages(result.thread_id))[-1]
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.cached_tokens, reply.usage.cache_write_tokens) == (1_000, 300, 600)
    assert reply.cost == pytest.approx((100 * 3 + 300 * 0.3 + 600 * 3.75 + 50 * 15) / 1e6)


# -- REST -------------------------------------------------------------------------------------
async def test_rest_reports_usage_per_thread_execution_and_summary(client: httpx.AsyncClient, actors: Any):
    alice, bob = actors.auth("alice"), actors.auth("bob")
    tid = (await client.post("/api/threads", json={"agent": "helper"}, headers=alice)).json()["id"]
    done = (await client.post(f"/api/threads/{tid}/messages?wait=true", json={"content": "1+2"}, headers=alice)).json()
    assert done["usage"]["prompt_tokens"] > 0 and done["cost"] is None
    thread = (await client.get(f"/api/threads/{tid}", headers=alice)).json()
    assert thread["usage"]["calls"] == 2 and thread["usage"]["costUsd"] is None
    assert thread["usage"]["uncostedCalls"] == 2
    assert thread["usage"]["inputTokens"] == done["usage"]["prompt_tokens"]
    runs = (await client.get(f"/api/threads/{tid}/executions", headers=alice)).json()["executions"]
    assert [(r["outcome"], r["usage"]["prompt_tokens"]) for r in runs] == [("response", done["usage"]["prompt_tokens"])]
    summary = (await client.get("/api/usage?by=agent", headers=alice)).json()
    assert summary["total"]["calls"] == 2 and summary["groups"][0]["agent"] == "helper"
    by_day = (await client.get("/api/usage?by=day&since=2000-01-01", headers=alice)).json()
    assert by_day["groups"][0]["day"] == datetime.now(tz=UTC).date().isoformat()
    assert (await client.get("/api/usage", headers=bob)).json()["total"]["calls"] == 0
    assert (await client.get(f"/api/usage?user={actors.ids['alice']}", headers=bob)).status_code == 403
    assert (await client.get("/api/usage?by=colour", headers=alice)).status_code == 422
    assert (await client.get("/api/usage?since=yesterday", headers=alice)).status_code == 422
    assert (await client.get("/api/usage?until=99999999999999999999", headers=alice)).status_code == 422
    everyone = (await client.get("/api/usage?by=user", headers=actors.auth("root"))).json()
    assert [g["user"] for g in everyone["groups"]] == [actors.ids["alice"]]


def test_usage_to_dict_names_every_field():
    from dataclasses import fields

    usage = Usage(1, 2, 3, 4, 5, 6)
    assert usage.to_dict() == {f.name: getattr(usage, f.name) for f in fields(Usage)}
