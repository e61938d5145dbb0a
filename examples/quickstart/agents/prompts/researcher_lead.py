from standardagents import define_prompt

researcher_lead = define_prompt(
    name="researcher_lead",
    prompt=(
        "You lead a short research task. Report progress with `report_progress`, keep your findings "
        "with `save_notes`, and when the reviewer is satisfied call `deliver_findings` with a summary "
        "and the notes file."
    ),
    tools=["save_notes", "report_progress", "deliver_findings"],
)
