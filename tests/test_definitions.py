"""Definitions: snake_case and the spec's camelCase, schemas from code, every problem at once."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from standardagents import (
    DefinitionError,
    ToolResult,
    define_agent,
    define_controller,
    define_effect,
    define_hook,
    define_model,
    define_prompt,
    define_thread_endpoint,
    define_tool,
)
from standardagents.definitions import PromptEnvPart, PromptIncludePart, PromptTextPart


def test_an_agent_in_the_specs_camel_case_shape_loads_unchanged():
    agent = define_agent({
        "name": "support_agent", "type": "dual_ai", "maxSessionTurns": 4, "exposeAsTool": True,
        "toolDescription": "Hand off to support", "primary": False,
        "sideA": {"label": "Support", "prompt": "p", "stopOnResponse": False, "maxSteps": 3,
                  "sessionStop": {"name": "close", "messageProperty": "summary", "attachmentsProperty": "files"},
                  "stopTool": "finish", "stopToolResponseProperty": "answer"},
        "sideB": {"prompt": "q", "sessionFail": "give_up", "sessionStatus": "report"},
        "parentHooks": [{"hook": "compact", "reason": "Keeps the parent small.", "stage": "before_parent"}],
    })
    assert agent.max_session_turns == 4 and agent.expose_as_tool and not agent.primary
    assert agent.side_a.session_tool("stop").attachments_property == "files"
    assert agent.side_b.session_tool("fail").name == "give_up"
    assert agent.parent_hooks[0].stage == "before_parent"


def test_every_agent_problem_is_reported_at_once_with_its_field():
    with pytest.raises(DefinitionError) as caught:
        define_agent(name="Not Snake", type="dual_ai", exposeAsTool=True,
                     side_a={"prompt": "p", "stopTool": "finish", "max_steps": 0}, unknown_field=1)
    fields = [where for where, _ in caught.value.problems]
    for expected in ("name", "side_b", "tool_description", "side_a.stop_tool_response_property", "unknown_field"):
        assert any(expected in f for f in fields), (expected, fields)
    assert any("maxSteps" in f or "max_steps" in f for f in fields)


def test_a_typed_function_becomes_a_tool_with_schema_from_signature_and_docstring():
    @define_tool(progress_argument="city")
    async def get_weather(city: str, days: int = 1, *, state=None) -> str:
        """The forecast for a city.

        Args:
            city: Name of the city.
            days: How many days ahead.
        """
        return f"{city}:{days}:{state is not None}"

    assert get_weather.name == "get_weather"
    assert get_weather.description == "The forecast for a city."
    props = get_weather.parameters["properties"]
    assert props["city"] == {"type": "string", "description": "Name of the city."}
    assert props["days"]["type"] == "integer" and props["days"]["default"] == 1
    assert get_weather.parameters["required"] == ["city"]
    assert "state" not in props and get_weather.wants_state
    assert get_weather.validate_arguments({"city": "Oslo", "days": "3"}) == {"city": "Oslo", "days": 3}
    with pytest.raises(ValueError, match="city"):
        get_weather.validate_arguments({"days": 2})


async def test_the_state_parameter_may_come_anywhere_in_the_signature():
    @define_tool
    async def note(text: str, state=None) -> str:
        """Note something."""
        return f"{text}/{state}"

    assert await note.invoke("STATE", {"text": "hi"}) == "hi/STATE"


async def test_a_tool_from_an_explicit_json_schema_validates_with_jsonschema():
    tool = define_tool(name="lookup", description="Look up.", parameters={
        "type": "object", "properties": {"q": {"type": "string", "minLength": 2}}, "required": ["q"]},
        execute=lambda state, args: ToolResult("success", args["q"].upper()))
    assert tool.validate_arguments({"q": "ok"}) == {"q": "ok"}
    with pytest.raises(ValueError, match="too short"):
        tool.validate_arguments({"q": "x"})
    assert (await tool.invoke(None, {"q": "ok"})).result == "OK"


async def test_a_tool_from_a_pydantic_model_receives_the_model():
    class Args(BaseModel):
        a: int
        b: int

    tool = define_tool(name="add", description="Add.", args=Args, execute=lambda args: args.a + args.b)
    assert tool.parameters["required"] == ["a", "b"]
    assert await tool.invoke(None, tool.validate_arguments({"a": "2", "b": 3})) == 5


def test_tool_problems_name_their_field():
    with pytest.raises(DefinitionError, match="progress_argument"):
        define_tool(name="t", description="x", parameters={"type": "object", "properties": {}},
                    execute=lambda a: a, progress_argument="missing")
    with pytest.raises(DefinitionError, match="not a valid JSON Schema"):
        define_tool(name="t", parameters={"type": "nonsense"}, execute=lambda a: a)
    with pytest.raises(DefinitionError, match="snake_case"):
        define_tool(name="BadName", parameters={"type": "object"}, execute=lambda a: a)


def test_prompts_take_text_or_structured_parts():
    prompt = define_prompt(name="p", prompt=["Hello ", {"type": "include", "prompt": "other"},
                                             {"type": "env", "key": "tone", "default": "calm"}],
                           tools=["a", {"name": "child", "include_text_response": False}], hooks=["h"], model="m",
                           toolDiscovery="ondemand")
    kinds = [type(p) for p in prompt.prompt]
    assert kinds == [PromptTextPart, PromptIncludePart, PromptEnvPart]
    assert prompt.includes() == ["other"] and prompt.tool_names() == ["a", "child"]
    assert prompt.tool_config("child").include_text_response is False
    assert define_prompt(name="q", prompt="x").hooks is None  # falls back to the agent's list


def test_models_never_carry_credentials():
    with pytest.raises(DefinitionError, match="api_key_env"):
        define_model(name="m", model="gpt", api_key="sk-secret")
    model = define_model(name="m", provider="openai", model="gpt", baseUrl="http://127.0.0.1:1/v1",
                         apiKeyEnv="MY_KEY", fallbacks=["n"], contextWindow=8000)
    assert (model.base_url, model.api_key_env, model.context_window) == ("http://127.0.0.1:1/v1", "MY_KEY", 8000)


async def test_hooks_come_in_every_form_and_fewer_arguments_are_allowed():
    def keep_two(state, messages):
        return messages[-2:]

    as_kwargs = define_hook(hook="filter_messages", id="keep_two", execute=keep_two)
    as_tuple = define_hook(("filter_messages", keep_two))
    decorated = define_hook("after_create_message", id="logged")(lambda state: None)
    assert as_kwargs.accepts == 2 and as_tuple.id == "keep_two" and decorated.hook == "after_create_message"
    assert await as_kwargs.call("state", [1, 2, 3], "context") == [2, 3]
    with pytest.raises(DefinitionError, match="not a hook of the spec"):
        define_hook(hook="on_everything", id="x", execute=keep_two)


def test_effects_load_from_arguments_or_the_packed_tuple_shape():
    def handler(state, args):
        return None

    a = define_effect("send_mail", "Send mail.", {"type": "object"}, handler)
    b = define_effect(("send_mail", "Send mail.", {"type": "object"}, handler))
    assert a.name == b.name == "send_mail" and a.handler is b.handler


def test_endpoints_default_to_authenticated_and_know_their_arity():
    ctrl = define_controller(lambda ctx: {"ok": True})
    public = define_controller(lambda ctx: "hi", {"access": "public"})
    endpoint = define_thread_endpoint(lambda request, state: None)
    assert (ctrl.access, public.access, endpoint.access, endpoint.accepts) == ("authenticated", "public", "authenticated", 2)
    with pytest.raises(DefinitionError, match="access level"):
        define_controller(lambda ctx: None, access="everyone")
