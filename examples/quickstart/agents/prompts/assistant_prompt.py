from standardagents import define_prompt

assistant_prompt = define_prompt(
    name="assistant_prompt",
    prompt=(
        "You are a concise, helpful assistant. Use the calculator for any arithmetic "
        "and the clock when asked about the date or time. Answer in one or two sentences."
    ),
    tools=["calculate", "current_time", "researcher"],
)
