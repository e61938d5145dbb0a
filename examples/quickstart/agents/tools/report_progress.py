from standardagents import define_tool


@define_tool
def report_progress(note: str = "Working on it.") -> str:
    """Tell the caller how the research is going.

    Args:
        note: A short progress note.
    """
    return "noted"
