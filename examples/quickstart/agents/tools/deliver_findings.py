from standardagents import define_tool


async def _deliver(args: dict) -> str:
    return "delivered"


deliver_findings = define_tool(
    name="deliver_findings",
    description="Finish the research: a summary and the files to hand back.",
    parameters={
        "type": "object",
        "properties": {
            "summary": {"type": "string", "description": "What was found, in two or three sentences.", "default": "Research complete."},
            "files": {"type": "array", "items": {"type": "string"}, "description": "Paths of files to attach.", "default": ["notes.md"]},
        },
    },
    execute=_deliver,
)
