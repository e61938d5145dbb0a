from standardagents import define_agent

assistant = define_agent(
    name="assistant",
    description="A helpful assistant that can do arithmetic and look up the time.",
    type="ai_human",
    side_a={"label": "Assistant", "prompt": "assistant_prompt", "stop_on_response": True, "max_steps": 8},
    hooks=["count_tool_calls"],
)
