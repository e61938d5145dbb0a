from standardagents import define_tool


@define_tool
def conclude(verdict: str = "Both sides made their case.") -> str:
    """End the debate with a verdict.

    Args:
        verdict: The verdict, in one sentence.
    """
    return f"Verdict: {verdict}"
