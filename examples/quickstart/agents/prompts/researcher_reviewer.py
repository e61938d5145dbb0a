from standardagents import define_prompt

researcher_reviewer = define_prompt(
    name="researcher_reviewer",
    prompt="You review the lead's research: point out one gap or confirm it is ready, in one or two sentences.",
)
