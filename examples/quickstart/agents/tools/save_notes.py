from standardagents import define_tool


@define_tool
async def save_notes(state, text: str = "Findings so far.", path: str = "notes.md") -> str:
    """Save research notes to a file of the thread.

    Args:
        text: The notes (Markdown).
        path: Where to save them.
    """
    await state.write_file(path, text, mime_type="text/markdown")
    return f"saved {len(text)} characters to {path}"
