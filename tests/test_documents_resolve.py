"""resolve_agent_spec: layering rules, defaults, and the resolved object's shape."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from standardagents.documents import (
    AGENT_SPEC,
    RESOLVED_DEFAULTS,
    ResolvedAgent,
    parse_spec,
    resolve_agent_spec,
)


def layer(**fields: Any) -> dict[str, Any]:
    parsed = parse_spec({"spec": AGENT_SPEC, **fields}, bundle=True)
    assert parsed.spec is not None, parsed.errors
    return parsed.spec


def test_defaults_apply_when_no_layer_says_anything() -> None:
    agent = resolve_agent_spec([layer()])
    assert agent.max_tokens == RESOLVED_DEFAULTS["maxTokens"]
    assert agent.temperature == RESOLVED_DEFAULTS["temperature"]
    assert agent.context_length == RESOLVED_DEFAULTS["contextLength"]
    assert agent.tool_discovery == RESOLVED_DEFAULTS["toolDiscovery"]
    assert agent.max_tool_iterations == RESOLVED_DEFAULTS["maxToolIterations"]
    assert agent.max_retries == RESOLVED_DEFAULTS["maxRetries"]
    assert (agent.id, agent.name, agent.description, agent.model, agent.base_url) == ("",) * 5


def test_optional_fields_are_none_when_no_layer_set_them() -> None:
    agent = resolve_agent_spec([layer()])
    assert agent.servers is None
    assert agent.request_timeout_seconds is None
    assert agent.first_token_seconds is None
    assert agent.loading_timeout_seconds is None
    assert agent.reasoning_effort is None
    assert agent.extra_body is None


def test_resolving_no_layers_gives_the_defaults() -> None:
    assert resolve_agent_spec([]) == resolve_agent_spec([layer()])


def test_the_last_layer_with_a_scalar_wins() -> None:
    low = layer(model={"model": "small", "temperature": 1.2, "maxTokens": 100})
    high = layer(model={"model": "large"})
    agent = resolve_agent_spec([low, high])
    assert (agent.model, agent.temperature, agent.max_tokens) == ("large", 1.2, 100)


def test_zero_in_a_higher_layer_overrides_rather_than_inherits() -> None:
    low = layer(model={"temperature": 0.9, "maxTokens": 4096}, retry={"maxRetries": 3})
    high = layer(model={"temperature": 0, "maxTokens": 0}, retry={"maxRetries": 0})
    agent = resolve_agent_spec([low, high])
    assert (agent.temperature, agent.max_tokens, agent.max_retries) == (0, 0, 0)


def test_an_empty_model_name_in_a_higher_layer_is_a_value() -> None:
    agent = resolve_agent_spec([layer(model={"model": "m"}), layer(model={"model": ""})])
    assert agent.model == ""


def test_endpoint_fields_layer_one_by_one() -> None:
    low = layer(endpoint={"baseUrl": "http://a/v1", "requestTimeoutSeconds": 30})
    high = layer(endpoint={"firstTokenSeconds": 0})
    agent = resolve_agent_spec([low, high])
    assert agent.base_url == "http://a/v1"
    assert agent.request_timeout_seconds == 30
    assert agent.first_token_seconds == 0


def test_a_higher_endpoint_replaces_the_base_url() -> None:
    agent = resolve_agent_spec(
        [layer(endpoint={"baseUrl": "http://a/v1"}), layer(endpoint={"baseUrl": "http://b/v1"})]
    )
    assert agent.base_url == "http://b/v1"


def test_the_api_key_is_always_empty() -> None:
    raw = {"spec": AGENT_SPEC, "endpoint": {"baseUrl": "http://a", "apiKey": "sk-live"}}
    agent = resolve_agent_spec([raw, layer(tasks={"title": {"model": "m"}})])
    assert agent.api_key == ""
    assert agent.tasks["title"].endpoint.api_key == ""
    assert agent.to_dict()["apiKey"] == ""


def test_extra_body_merges_by_key() -> None:
    low = layer(model={"extraBody": {"top_k": 20, "min_p": 0.05}})
    high = layer(model={"extraBody": {"top_k": 40}})
    agent = resolve_agent_spec([low, high])
    assert agent.extra_body == {"top_k": 40, "min_p": 0.05}


def test_extensions_merge_by_key() -> None:
    low = layer(extensions={"a.x": 1, "b.y": {"deep": 1}})
    high = layer(extensions={"b.y": {"other": 2}})
    agent = resolve_agent_spec([low, high])
    assert agent.extensions == {"a.x": 1, "b.y": {"other": 2}}


def test_prompt_parts_with_different_ids_stack_in_order() -> None:
    low = layer(prompt=[{"id": "project", "text": "P"}, {"id": "role", "text": "R"}])
    high = layer(prompt=[{"id": "lane", "text": "L"}])
    agent = resolve_agent_spec([low, high])
    assert [p["id"] for p in agent.prompt] == ["project", "role", "lane"]
    assert agent.system_prompt == "P\n\nR\n\nL"


def test_a_prompt_part_with_the_same_id_replaces_in_place() -> None:
    low = layer(prompt=[{"id": "project", "text": "P"}, {"id": "role", "text": "R"}])
    high = layer(prompt=[{"id": "project", "text": "  P2  "}])
    agent = resolve_agent_spec([low, high])
    assert [p["id"] for p in agent.prompt] == ["project", "role"]
    assert agent.system_prompt == "P2\n\nR"


def test_an_empty_prompt_text_deletes_the_part_from_the_system_prompt() -> None:
    low = layer(prompt=[{"id": "a", "text": "A"}, {"id": "b", "text": "B"}])
    high = layer(prompt=[{"id": "a", "text": ""}])
    assert resolve_agent_spec([low, high]).system_prompt == "B"


def test_prompt_part_fields_merge_so_a_ref_keeps_the_text_below() -> None:
    low = layer(prompt=[{"id": "a", "text": "A"}])
    high = layer(prompt=[{"id": "a", "ref": {"type": "file", "value": "a.md"}}])
    agent = resolve_agent_spec([low, high])
    assert agent.prompt == ({"id": "a", "text": "A", "ref": {"type": "file", "value": "a.md"}},)


def test_a_ref_only_part_adds_nothing_to_the_system_prompt() -> None:
    agent = resolve_agent_spec(
        [
            layer(
                prompt=[{"id": "a", "ref": {"type": "url", "value": "u"}}, {"id": "b", "text": "B"}]
            )
        ]
    )
    assert agent.system_prompt == "B"
    assert len(agent.prompt) == 2


def hook(**fields: Any) -> dict[str, Any]:
    return {"id": "h", "on": "beforeTurn", "server": "mem", "tool": "recall", **fields}


def test_hooks_merge_by_id_with_fields_merged() -> None:
    low = layer(hooks=[hook(args={"k": 1}, timeoutMs=500), hook(id="g", on="afterTurn")])
    high = layer(hooks=[hook(enabled=False), hook(id="z")])
    agent = resolve_agent_spec([low, high])
    assert [h["id"] for h in agent.hooks] == ["h", "g", "z"]
    assert agent.hooks[0] == hook(args={"k": 1}, timeoutMs=500, enabled=False)


def test_tasks_merge_by_name_in_order_of_first_appearance() -> None:
    low = layer(tasks={"title": {"model": "t1", "maxTokens": 20}, "compaction": {"model": "c"}})
    high = layer(tasks={"followups": {"model": "f"}, "title": {"model": "t2"}})
    agent = resolve_agent_spec([low, high])
    assert list(agent.tasks) == ["title", "compaction", "followups"]
    assert (agent.tasks["title"].model, agent.tasks["title"].max_tokens) == ("t2", 20)


def test_an_empty_task_model_declines_the_task_from_below() -> None:
    low = layer(tasks={"title": {"model": "t"}, "compaction": {"model": "c"}})
    high = layer(tasks={"title": {"model": ""}})
    agent = resolve_agent_spec([low, high])
    assert list(agent.tasks) == ["compaction"]


def test_a_declined_task_can_be_configured_again_above() -> None:
    agent = resolve_agent_spec(
        [
            layer(tasks={"title": {"model": "t"}}),
            layer(tasks={"title": {"model": ""}}),
            layer(tasks={"title": {"model": "u"}}),
        ]
    )
    assert agent.tasks["title"].model == "u"


def test_a_task_with_no_model_anywhere_is_left_out() -> None:
    agent = resolve_agent_spec([layer(tasks={"title": {"maxTokens": 10}})])
    assert agent.tasks == {}


def test_a_task_inherits_the_agent_endpoint_field_by_field() -> None:
    agent = resolve_agent_spec(
        [
            layer(endpoint={"baseUrl": "http://main/v1", "requestTimeoutSeconds": 60}),
            layer(tasks={"title": {"model": "t", "endpoint": {"baseUrl": "http://side/v1"}}}),
            layer(tasks={"compaction": {"model": "c"}}),
        ]
    )
    title, compaction = agent.tasks["title"].endpoint, agent.tasks["compaction"].endpoint
    assert (title.base_url, title.request_timeout_seconds) == ("http://side/v1", 60)
    assert (compaction.base_url, compaction.request_timeout_seconds) == ("http://main/v1", 60)


def test_task_endpoints_layer_by_field_across_layers() -> None:
    agent = resolve_agent_spec(
        [
            layer(tasks={"title": {"model": "t", "endpoint": {"baseUrl": "http://s/v1"}}}),
            layer(tasks={"title": {"endpoint": {"firstTokenSeconds": 5}}}),
        ]
    )
    endpoint = agent.tasks["title"].endpoint
    assert (endpoint.base_url, endpoint.first_token_seconds) == ("http://s/v1", 5)


def test_the_tool_select_task_flattens_to_tool_select_model() -> None:
    agent = resolve_agent_spec([layer(tasks={"toolSelect": {"model": "picker"}})])
    assert agent.tool_select_model == "picker"
    assert resolve_agent_spec([layer()]).tool_select_model == ""


def test_servers_absent_everywhere_means_every_server() -> None:
    assert resolve_agent_spec([layer(tools={"discovery": "ondemand"})]).servers is None


def test_servers_replace_whole_rather_than_union() -> None:
    low = layer(tools={"servers": ["fs", "git"]})
    assert resolve_agent_spec([low, layer(tools={"servers": ["web"]})]).servers == ("web",)
    assert resolve_agent_spec([low, layer(tools={"servers": []})]).servers == ()


def test_servers_set_below_survive_a_layer_that_says_nothing_about_them() -> None:
    low = layer(tools={"servers": []})
    high = layer(tools={"maxIterations": 5})
    agent = resolve_agent_spec([low, high])
    assert (agent.servers, agent.max_tool_iterations) == ((), 5)


def test_requires_are_unioned_across_layers() -> None:
    agent = resolve_agent_spec([layer(requires=["a", "b"]), layer(requires=["b", "c"])])
    assert agent.requires == ("a", "b", "c")


def test_id_name_and_description_take_the_last_non_empty_value() -> None:
    agent = resolve_agent_spec(
        [layer(id="base", name="Base", description="d"), layer(id="reviewer", name="")]
    )
    assert (agent.id, agent.name, agent.description) == ("reviewer", "Base", "d")


def test_name_falls_back_to_id() -> None:
    assert resolve_agent_spec([layer(id="reviewer")]).name == "reviewer"


def test_bundled_servers_merge_by_effective_slug() -> None:
    low = layer(bundle={"mcpServers": [{"slug": "fs", "command": "a"}]})
    high = layer(bundle={"mcpServers": [{"id": "fs", "args": ["-v"]}, {"id": "git"}]})
    agent = resolve_agent_spec([low, high])
    assert agent.mcp_servers == (
        {"slug": "fs", "command": "a", "id": "fs", "args": ["-v"]},
        {"id": "git"},
    )


def test_to_dict_leaves_out_optional_fields_no_layer_set() -> None:
    out = resolve_agent_spec([layer(id="a")]).to_dict()
    for key in ("servers", "requestTimeoutSeconds", "firstTokenSeconds", "extraBody"):
        assert key not in out
    assert out["maxToolIterations"] == RESOLVED_DEFAULTS["maxToolIterations"]


def test_to_dict_uses_the_formats_camel_case_names() -> None:
    agent = resolve_agent_spec(
        [
            layer(
                endpoint={"baseUrl": "http://a/v1", "requestTimeoutSeconds": 9},
                model={"model": "m", "reasoningEffort": "low", "extraBody": {"k": 1}},
                retry={"loadingTimeoutSeconds": 0},
                tools={"servers": []},
                tasks={"title": {"model": "t", "temperature": 0}},
            )
        ]
    )
    out = agent.to_dict()
    assert out["baseUrl"] == "http://a/v1"
    assert out["requestTimeoutSeconds"] == 9
    assert out["loadingTimeoutSeconds"] == 0
    assert out["reasoningEffort"] == "low"
    assert out["extraBody"] == {"k": 1}
    assert out["servers"] == []
    assert out["tasks"] == {
        "title": {
            "model": "t",
            "endpoint": {"baseUrl": "http://a/v1", "apiKey": "", "requestTimeoutSeconds": 9},
            "temperature": 0,
        }
    }


def test_the_resolved_agent_is_frozen() -> None:
    agent = resolve_agent_spec([layer()])
    assert isinstance(agent, ResolvedAgent)
    with pytest.raises(dataclasses.FrozenInstanceError):
        agent.model = "x"  # type: ignore[misc]


def test_resolving_does_not_share_state_with_the_layers() -> None:
    low = layer(extensions={"a": {"b": 1}}, prompt=[{"id": "p", "text": "t"}])
    agent = resolve_agent_spec([low])
    agent.extensions["a"]["b"] = 2
    agent.prompt[0]["text"] = "changed"
    assert low["extensions"] == {"a": {"b": 1}}
    assert low["prompt"] == [{"id": "p", "text": "t"}]
