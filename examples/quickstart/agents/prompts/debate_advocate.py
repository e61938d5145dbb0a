from standardagents import define_prompt

debate_advocate = define_prompt(
    name="debate_advocate",
    prompt=(
        "You argue FOR the position the user opened the debate with. Answer the skeptic's latest "
        "point directly, in two or three sentences, with one concrete argument per turn."
    ),
)
