"""parse_spec: the four hard errors, every kind of drop, and what is carried through."""

from __future__ import annotations

import math
from typing import Any

import pytest

from standardagents.documents import AGENT_SPEC, SPEC_EVENTS, parse_spec


def doc(**fields: Any) -> dict[str, Any]:
    return {"spec": AGENT_SPEC, **fields}


def warned(path: str, warnings: list[str]) -> bool:
    return any(w.startswith(f"{path}: ") for w in warnings)


# --- the four hard errors -------------------------------------------------------------


@pytest.mark.parametrize("value", [None, [], "cubicecho.agent/1", 1, True, 2.5])
def test_a_document_that_is_not_an_object_is_refused(value: object) -> None:
    parsed = parse_spec(value)
    assert parsed.spec is None
    assert parsed.errors == ["spec: must be an object"]
    assert parsed.warnings == []


def test_a_missing_spec_token_is_refused() -> None:
    parsed = parse_spec({"id": "a"})
    assert parsed.spec is None
    assert len(parsed.errors) == 1 and parsed.errors[0].startswith("spec: ")


@pytest.mark.parametrize("token", ["cubicecho.agent", "other/1", 1, True, "cubicecho.agent/1.1"])
def test_a_foreign_spec_token_is_refused(token: object) -> None:
    parsed = parse_spec({"spec": token})
    assert parsed.spec is None
    assert parsed.errors == [f'spec: must be "{AGENT_SPEC}"']


def test_another_major_version_is_refused_naming_both_versions() -> None:
    parsed = parse_spec({"spec": "cubicecho.agent/2"})
    assert parsed.spec is None
    assert parsed.errors == ["spec: is version 2, and this build reads version 1"]


@pytest.mark.parametrize(
    ("key", "value", "kind"),
    [
        ("prompt", {"id": "a"}, "an array"),
        ("prompt", "text", "an array"),
        ("hooks", {}, "an array"),
        ("tasks", [], "an object"),
        ("tasks", "x", "an object"),
        ("requires", "sandbox", "an array"),
    ],
)
def test_a_container_of_the_wrong_kind_is_refused(key: str, value: object, kind: str) -> None:
    parsed = parse_spec(doc(**{key: value}))
    assert parsed.spec is None
    assert parsed.errors == [f"{key}: must be {kind}"]


def test_a_requires_entry_that_is_not_a_string_is_refused() -> None:
    parsed = parse_spec(doc(requires=["a", 3]))
    assert parsed.spec is None
    assert parsed.errors == ["requires[1]: must be a string"]


def test_a_requires_entry_the_host_does_not_understand_is_refused() -> None:
    parsed = parse_spec(doc(requires=["org.sandbox", "org.audit"]), understands=["org.sandbox"])
    assert parsed.spec is None
    assert parsed.errors == ['requires[1]: "org.audit" is not understood by this host']


def test_requires_entries_the_host_understands_are_kept() -> None:
    parsed = parse_spec(doc(requires=["org.sandbox"]), understands=["org.sandbox", "x"])
    assert parsed.errors == []
    assert parsed.spec is not None and parsed.spec["requires"] == ["org.sandbox"]


def test_requires_is_not_checked_when_the_host_names_no_understood_keys() -> None:
    parsed = parse_spec(doc(requires=["anything"]))
    assert parsed.errors == [] and parsed.spec is not None


def test_an_empty_understands_list_refuses_every_requirement() -> None:
    parsed = parse_spec(doc(requires=["a"]), understands=[])
    assert parsed.spec is None


def test_every_error_is_reported_at_once() -> None:
    parsed = parse_spec({"spec": "x", "prompt": {}, "hooks": 1, "tasks": [], "requires": [1]})
    paths = [e.split(":")[0] for e in parsed.errors]
    assert paths == ["spec", "prompt", "tasks", "hooks", "requires[0]"]


def test_warnings_are_still_reported_alongside_errors() -> None:
    parsed = parse_spec({"spec": "x", "model": {"temperature": 9}})
    assert parsed.spec is None
    assert warned("model.temperature", parsed.warnings)


# --- drops --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "path"),
    [
        ({"temperature": 2.5}, "model.temperature"),
        ({"temperature": -0.1}, "model.temperature"),
        ({"temperature": True}, "model.temperature"),
        ({"temperature": math.nan}, "model.temperature"),
        ({"maxTokens": -1}, "model.maxTokens"),
        ({"maxTokens": math.inf}, "model.maxTokens"),
        ({"maxTokens": 10**400}, "model.maxTokens"),
        ({"maxTokens": "100"}, "model.maxTokens"),
        ({"contextLength": False}, "model.contextLength"),
        ({"model": 3}, "model.model"),
        ({"reasoningEffort": ["high"]}, "model.reasoningEffort"),
    ],
)
def test_a_bad_model_value_is_dropped_with_a_warning(model: dict[str, Any], path: str) -> None:
    parsed = parse_spec(doc(model=model))
    assert parsed.errors == []
    assert parsed.spec is not None and parsed.spec["model"] == {}
    assert warned(path, parsed.warnings)


def test_an_out_of_range_value_is_dropped_not_clamped() -> None:
    parsed = parse_spec(doc(model={"temperature": 3, "maxTokens": 5}))
    assert parsed.spec is not None
    assert parsed.spec["model"] == {"maxTokens": 5}
    assert parsed.warnings == ["model.temperature: must be between 0 and 2, and was dropped"]


def test_zero_empty_and_false_are_values_not_absence() -> None:
    parsed = parse_spec(
        doc(
            model={"model": "", "temperature": 0, "maxTokens": 0, "contextLength": 0},
            tools={"servers": []},
            retry={"maxRetries": 0},
        )
    )
    assert parsed.warnings == []
    assert parsed.spec is not None
    assert parsed.spec["model"] == {
        "model": "",
        "temperature": 0,
        "maxTokens": 0,
        "contextLength": 0,
    }
    assert parsed.spec["tools"] == {"servers": []}
    assert parsed.spec["retry"] == {"maxRetries": 0}


def test_null_reads_as_absent_without_a_warning() -> None:
    parsed = parse_spec(
        doc(id=None, model={"temperature": None}, prompt=None, tasks=None, retry=None, bundle=None)
    )
    assert parsed.errors == [] and parsed.warnings == []
    assert parsed.spec == {"spec": AGENT_SPEC, "model": {}}


def test_floats_and_ints_are_both_numbers() -> None:
    parsed = parse_spec(doc(model={"maxTokens": 512.0, "temperature": 1}))
    assert parsed.warnings == []
    assert parsed.spec is not None and parsed.spec["model"] == {
        "maxTokens": 512.0,
        "temperature": 1,
    }


@pytest.mark.parametrize("key", ["endpoint", "model", "tools", "retry", "extensions", "bundle"])
def test_a_section_that_is_not_an_object_is_dropped(key: str) -> None:
    parsed = parse_spec(doc(**{key: [1]}), bundle=True)
    assert parsed.errors == []
    assert parsed.spec is not None and key not in parsed.spec
    assert parsed.warnings == [f"{key}: must be an object, and was dropped"]


def test_a_string_field_of_another_type_is_dropped() -> None:
    parsed = parse_spec(doc(id=7, name=True, description={}))
    assert parsed.spec == {"spec": AGENT_SPEC}
    assert [w.split(":")[0] for w in parsed.warnings] == ["id", "name", "description"]


def test_an_api_key_in_an_endpoint_is_dropped() -> None:
    parsed = parse_spec(doc(endpoint={"baseUrl": "http://h/v1", "apiKey": "sk-1"}))
    assert parsed.spec is not None and parsed.spec["endpoint"] == {"baseUrl": "http://h/v1"}
    assert warned("endpoint.apiKey", parsed.warnings)


def test_a_snake_case_api_key_in_a_task_endpoint_is_dropped() -> None:
    parsed = parse_spec(doc(tasks={"title": {"model": "m", "endpoint": {"api_key": "sk"}}}))
    assert parsed.spec is not None and parsed.spec["tasks"] == {"title": {"model": "m"}}
    assert warned("tasks.title.endpoint.apiKey", parsed.warnings)


def test_negative_endpoint_timeouts_are_dropped() -> None:
    parsed = parse_spec(doc(endpoint={"requestTimeoutSeconds": -1, "firstTokenSeconds": 0}))
    assert parsed.spec is not None and parsed.spec["endpoint"] == {"firstTokenSeconds": 0}
    assert warned("endpoint.requestTimeoutSeconds", parsed.warnings)


def test_reserved_extra_body_fields_are_dropped_and_others_kept() -> None:
    body = {"model": "x", "messages": [], "stream": True, "tools": [], "top_k": 20, "seed": None}
    parsed = parse_spec(doc(model={"extraBody": body}))
    assert parsed.spec is not None
    assert parsed.spec["model"]["extraBody"] == {"top_k": 20, "seed": None}
    assert [w.split(":")[0] for w in parsed.warnings] == [
        "model.extraBody.model",
        "model.extraBody.messages",
        "model.extraBody.stream",
        "model.extraBody.tools",
    ]


def test_extra_body_that_is_not_an_object_is_dropped() -> None:
    parsed = parse_spec(doc(model={"extraBody": "x"}))
    assert parsed.spec is not None and parsed.spec["model"] == {}
    assert warned("model.extraBody", parsed.warnings)


def test_prompt_parts_without_an_id_or_content_are_dropped() -> None:
    parsed = parse_spec(
        doc(prompt=["text", {"text": "no id"}, {"id": ""}, {"id": "a"}, {"id": "b", "text": "ok"}])
    )
    assert parsed.spec is not None and parsed.spec["prompt"] == [{"id": "b", "text": "ok"}]
    assert [w.split(":")[0] for w in parsed.warnings] == [
        "prompt[0]",
        "prompt[1]",
        "prompt[2]",
        "prompt[3]",
    ]


def test_an_empty_prompt_text_is_kept_as_a_value() -> None:
    parsed = parse_spec(doc(prompt=[{"id": "a", "text": ""}]))
    assert parsed.warnings == []
    assert parsed.spec is not None and parsed.spec["prompt"] == [{"id": "a", "text": ""}]


@pytest.mark.parametrize(
    "ref",
    [{"type": "disk", "value": "a.md"}, {"type": "file", "value": ""}, {"type": "url"}, "a.md"],
)
def test_a_malformed_prompt_ref_is_dropped(ref: object) -> None:
    parsed = parse_spec(doc(prompt=[{"id": "a", "text": "t", "ref": ref}]))
    assert parsed.spec is not None and parsed.spec["prompt"] == [{"id": "a", "text": "t"}]
    assert warned("prompt[0].ref", parsed.warnings)


def test_a_part_whose_only_content_was_a_bad_ref_is_dropped_whole() -> None:
    parsed = parse_spec(doc(prompt=[{"id": "a", "ref": {"type": "ftp", "value": "x"}}]))
    assert parsed.spec is not None and parsed.spec["prompt"] == []
    assert [w.split(":")[0] for w in parsed.warnings] == ["prompt[0].ref", "prompt[0]"]


def test_a_valid_ref_is_kept_without_its_extra_keys() -> None:
    ref = {"type": "url", "value": "https://x/p.md", "etag": "1"}
    parsed = parse_spec(doc(prompt=[{"id": "a", "ref": ref}]))
    assert parsed.spec is not None
    assert parsed.spec["prompt"] == [{"id": "a", "ref": {"type": "url", "value": "https://x/p.md"}}]


def test_a_variable_reference_is_kept_literally_with_a_note() -> None:
    parsed = parse_spec(doc(endpoint={"baseUrl": "${OPENAI_BASE_URL}"}))
    assert parsed.spec is not None and parsed.spec["endpoint"] == {"baseUrl": "${OPENAI_BASE_URL}"}
    assert len(parsed.warnings) == 1
    assert parsed.warnings[0].startswith("endpoint.baseUrl: ")
    assert "dropped" not in parsed.warnings[0]


def test_a_dollar_without_braces_gets_no_note() -> None:
    parsed = parse_spec(doc(description="costs $5 {a}"))
    assert parsed.warnings == []


def test_bad_tool_settings_are_dropped() -> None:
    parsed = parse_spec(doc(tools={"discovery": "lazy", "maxIterations": 0, "servers": "all"}))
    assert parsed.spec is not None and parsed.spec["tools"] == {}
    assert [w.split(":")[0] for w in parsed.warnings] == [
        "tools.discovery",
        "tools.servers",
        "tools.maxIterations",
    ]


def test_bad_server_slugs_are_dropped_one_by_one() -> None:
    parsed = parse_spec(doc(tools={"servers": ["fs", "", 3, None, "git"], "discovery": "ondemand"}))
    assert parsed.spec is not None
    assert parsed.spec["tools"] == {"discovery": "ondemand", "servers": ["fs", "git"]}
    assert [w.split(":")[0] for w in parsed.warnings] == ["tools.servers[1]", "tools.servers[2]"]


def test_an_empty_retry_section_reads_as_absent() -> None:
    parsed = parse_spec(doc(retry={"maxRetries": -2}))
    assert parsed.spec == {"spec": AGENT_SPEC}
    assert warned("retry.maxRetries", parsed.warnings)


def test_unknown_task_names_are_carried_without_a_warning() -> None:
    parsed = parse_spec(doc(tasks={"translate": {"model": "m", "temperature": 0.2}}))
    assert parsed.warnings == []
    assert parsed.spec is not None
    assert parsed.spec["tasks"] == {"translate": {"model": "m", "temperature": 0.2}}


def test_a_task_that_is_not_an_object_is_dropped_and_a_null_one_skipped() -> None:
    parsed = parse_spec(
        doc(tasks={"title": "m", "followups": None, "compaction": {"maxTokens": -1}})
    )
    assert parsed.spec is not None and parsed.spec["tasks"] == {"compaction": {}}
    assert [w.split(":")[0] for w in parsed.warnings] == [
        "tasks.title",
        "tasks.compaction.maxTokens",
    ]


def hook(**fields: Any) -> dict[str, Any]:
    return {"id": "h", "on": "beforeTurn", "server": "mem", "tool": "recall", **fields}


@pytest.mark.parametrize("missing", ["id", "on", "server", "tool"])
def test_a_hook_missing_a_required_field_is_dropped(missing: str) -> None:
    held = hook()
    del held[missing]
    parsed = parse_spec(doc(hooks=[held]))
    assert parsed.spec is not None and parsed.spec["hooks"] == []
    assert parsed.warnings[-1].startswith("hooks[0]: ")


def test_a_hook_on_an_unknown_event_is_dropped() -> None:
    parsed = parse_spec(doc(hooks=[hook(on="afterLunch")]))
    assert parsed.spec is not None and parsed.spec["hooks"] == []
    assert warned("hooks[0].on", parsed.warnings)


def test_a_hook_on_an_event_the_host_never_fires_is_kept_with_a_note() -> None:
    parsed = parse_spec(doc(hooks=[hook(on="beforeCompact")]), events=["beforeTurn"])
    assert parsed.spec is not None and parsed.spec["hooks"] == [hook(on="beforeCompact")]
    assert len(parsed.warnings) == 1 and parsed.warnings[0].startswith("hooks[0].on: ")
    assert "dropped" not in parsed.warnings[0]


@pytest.mark.parametrize("event", ["sessionStart", "beforeTurn"])
def test_inject_is_kept_on_events_before_a_request(event: str) -> None:
    parsed = parse_spec(doc(hooks=[hook(on=event, inject=True)]))
    assert parsed.warnings == []
    assert parsed.spec is not None and parsed.spec["hooks"][0]["inject"] is True


@pytest.mark.parametrize(
    "event", [e for e in SPEC_EVENTS if e not in ("sessionStart", "beforeTurn")]
)
def test_inject_is_dropped_on_events_after_the_model_answered(event: str) -> None:
    parsed = parse_spec(doc(hooks=[hook(on=event, inject=True)]))
    assert parsed.spec is not None and "inject" not in parsed.spec["hooks"][0]
    assert warned("hooks[0].inject", parsed.warnings)


def test_inject_false_is_kept_on_any_event() -> None:
    parsed = parse_spec(doc(hooks=[hook(on="afterTurn", inject=False)]))
    assert parsed.warnings == []
    assert parsed.spec is not None and parsed.spec["hooks"][0]["inject"] is False


def test_veto_is_kept_only_on_before_compact() -> None:
    parsed = parse_spec(doc(hooks=[hook(on="beforeCompact", veto=True), hook(id="g", veto=True)]))
    assert parsed.spec is not None
    assert parsed.spec["hooks"][0]["veto"] is True
    assert "veto" not in parsed.spec["hooks"][1]
    assert [w.split(":")[0] for w in parsed.warnings] == ["hooks[1].veto"]


def test_hook_values_of_the_wrong_type_are_dropped_and_args_carried() -> None:
    args = {"query": "{{message.text}}", "n": None}
    parsed = parse_spec(doc(hooks=[hook(args=args, enabled="yes", timeoutMs=-5, maxTokens=64)]))
    assert parsed.spec is not None
    assert parsed.spec["hooks"] == [hook(args=args, maxTokens=64)]
    assert [w.split(":")[0] for w in parsed.warnings] == ["hooks[0].timeoutMs", "hooks[0].enabled"]


def test_a_bundle_is_dropped_unless_the_host_opts_in() -> None:
    bundle = {"mcpServers": [{"slug": "fs", "command": "npx"}]}
    parsed = parse_spec(doc(bundle=bundle))
    assert parsed.spec == {"spec": AGENT_SPEC}
    assert parsed.warnings[0].startswith("bundle: ")


def test_a_bundle_is_kept_with_every_server_key_when_the_host_opts_in() -> None:
    server = {"id": "1", "slug": "fs", "command": "npx", "env": {"T": "x"}, "callTimeoutMs": 90000}
    parsed = parse_spec(doc(bundle={"mcpServers": [server]}), bundle=True)
    assert parsed.warnings == []
    assert parsed.spec is not None and parsed.spec["bundle"] == {"mcpServers": [server]}


def test_bundled_servers_without_a_name_or_with_a_taken_one_are_dropped() -> None:
    servers = [{"slug": "fs"}, {"command": "x"}, {"id": "fs"}, {"slug": "", "id": "git"}, 4]
    parsed = parse_spec(doc(bundle={"mcpServers": servers}), bundle=True)
    assert parsed.spec is not None
    assert parsed.spec["bundle"] == {"mcpServers": [{"slug": "fs"}, {"slug": "", "id": "git"}]}
    assert [w.split(":")[0] for w in parsed.warnings] == [
        "bundle.mcpServers[1]",
        "bundle.mcpServers[2]",
        "bundle.mcpServers[4]",
    ]


def test_bundled_servers_that_are_not_a_list_are_dropped() -> None:
    parsed = parse_spec(doc(bundle={"mcpServers": {"fs": {}}}), bundle=True)
    assert parsed.spec == {"spec": AGENT_SPEC}
    assert warned("bundle.mcpServers", parsed.warnings)


def test_unknown_top_level_keys_are_carried_through_with_a_note() -> None:
    parsed = parse_spec(doc(memory={"kind": "vector"}, later=None))
    assert parsed.errors == []
    assert parsed.spec == {"spec": AGENT_SPEC, "memory": {"kind": "vector"}, "later": None}
    assert [w.split(":")[0] for w in parsed.warnings] == ["memory", "later"]


def test_extensions_are_carried_unvalidated() -> None:
    extensions = {"com.example.ui": {"color": "red", "nan": None}, "org.x": [1, 2]}
    parsed = parse_spec(doc(extensions=extensions))
    assert parsed.warnings == []
    assert parsed.spec is not None and parsed.spec["extensions"] == extensions


def test_parsing_does_not_alter_the_input_document() -> None:
    document = doc(model={"extraBody": {"stream": True, "k": 1}}, prompt=[{"id": "a"}])
    snapshot = repr(document)
    parse_spec(document)
    assert repr(document) == snapshot


def test_every_message_starts_with_a_path_and_a_colon() -> None:
    parsed = parse_spec(
        {
            "spec": "cubicecho.agent/9",
            "requires": [1],
            "model": {"temperature": "hot"},
            "prompt": [{"id": "a", "ref": {"type": "x"}}],
            "hooks": [hook(veto=True)],
        }
    )
    for message in parsed.errors + parsed.warnings:
        path, sep, rest = message.partition(": ")
        assert sep and rest and " " not in path
