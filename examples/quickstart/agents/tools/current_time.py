from datetime import UTC, datetime

from standardagents import define_tool


@define_tool
def current_time(timezone_name: str = "UTC") -> str:
    """The current date and time.

    Args:
        timezone_name: Only "UTC" is supported by this example.
    """
    now = datetime.now(UTC)
    return now.strftime("%A %d %B %Y, %H:%M UTC")
