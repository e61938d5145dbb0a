from standardagents import define_agent

researcher = define_agent(
    name="researcher",
    title="Researcher",
    description="A lead and a reviewer research a question together and deliver a short report file.",
    type="dual_ai",
    primary=False,
    expose_as_tool=True,
    tool_description="Research a question in depth and return a summary with a notes file attached.",
    max_session_turns=6,
    side_a={
        "label": "Lead",
        "prompt": "researcher_lead",
        "stop_on_response": True,
        "max_steps": 6,
        "session_status": {"name": "report_progress", "message_property": "note"},
        "session_stop": {"name": "deliver_findings", "message_property": "summary", "attachments_property": "files"},
    },
    side_b={"label": "Reviewer", "prompt": "researcher_reviewer", "stop_on_response": True, "max_steps": 2},
)
