from standardagents import define_agent

debate = define_agent(
    name="debate",
    title="Debate",
    description="Two AI sides argue a motion; the skeptic concludes with a verdict, or the debate ends after six turns.",
    type="dual_ai",
    max_session_turns=6,
    side_a={"label": "Advocate", "prompt": "debate_advocate", "stop_on_response": True, "max_steps": 4},
    side_b={
        "label": "Skeptic",
        "prompt": "debate_skeptic",
        "stop_on_response": True,
        "max_steps": 4,
        "session_stop": {"name": "conclude", "message_property": "verdict"},
    },
)
