from standardagents import define_hook


@define_hook("tool_call_done", id="count_tool_calls")
async def count_tool_calls(state, tool_call, tool_result):
    """Keep a running count of tool calls per thread in the thread's env values."""
    count = int(await state.get_env("tool_calls", 0)) + 1
    await state.set_env("tool_calls", count)
