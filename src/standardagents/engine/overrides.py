"""A turn's own model and system prompt for one side, in place of the side's definitions.

This is how a step is run again with another model or an edited prompt (the web app's
"Re-run"): the definitions stay as they are, and only the execution that carries the override
sees the changed side. The override is kept with the execution's options, so a turn that
pauses for an approval or resumes after a crash runs with it again; the step records name the
model actually called.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..exceptions import StandardAgentsError

__all__ = ["SideOverride"]

#: longest system prompt an override may carry (characters)
MAX_SYSTEM = 200_000


@dataclass(frozen=True, slots=True)
class SideOverride:
    """Side ``side`` calls model ``model`` (a model definition's name) and/or is given
    ``system`` as its whole system prompt (an empty string: no system prompt) for this turn."""

    side: Literal["a", "b"] = "a"
    model: str | None = None
    system: str | None = None

    def __post_init__(self) -> None:
        if self.side not in ("a", "b"):
            raise StandardAgentsError(f"an override's side is 'a' or 'b', not {self.side!r}")
        if self.model is not None and (not isinstance(self.model, str) or not self.model.strip()):
            raise StandardAgentsError("an override's model is the name of a model definition")
        if self.system is not None and (not isinstance(self.system, str) or len(self.system) > MAX_SYSTEM):
            raise StandardAgentsError(f"an override's system prompt is text of at most {MAX_SYSTEM} characters")

    def to_state(self) -> dict[str, Any]:
        kept: dict[str, Any] = {"side": self.side}
        if self.model is not None:
            kept["model"] = self.model
        if self.system is not None:
            kept["system"] = self.system
        return kept

    @classmethod
    def from_state(cls, kept: Any) -> SideOverride | None:
        """What :meth:`to_state` wrote, or ``None`` when it cannot be read back."""
        if not isinstance(kept, dict):
            return None
        try:
            return cls(kept.get("side", "a"), kept.get("model"), kept.get("system"))
        except StandardAgentsError:
            return None
