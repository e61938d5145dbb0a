from standardagents import define_prompt

debate_skeptic = define_prompt(
    name="debate_skeptic",
    prompt=(
        "You argue AGAINST the advocate, in two or three sentences per turn. When the strongest "
        "arguments on both sides have been made, call `conclude` with a one-sentence verdict."
    ),
    tools=["conclude"],
)
