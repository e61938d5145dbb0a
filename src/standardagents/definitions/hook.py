"""Hook definitions: user code the engine calls at fixed points of a thread's life."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Literal, overload

from pydantic import ValidationError

from ..exceptions import DefinitionError
from ._base import Definition, check_snake_case, problems_from_validation

__all__ = ["HOOK_ARITY", "HOOK_NAMES", "THREAD_HOOK_NAMES", "USER_HOOK_NAMES", "HookDefinition", "HookName",
           "define_hook"]

#: the spec's hook names, so a type checker flags a misspelt one
HookName = Literal[
    "after_thread_created", "after_subagent_created", "after_system_message", "filter_messages",
    "prefilter_llm_history", "before_create_message", "after_create_message", "before_update_message",
    "after_update_message", "before_store_tool_result", "after_tool_call_success", "after_tool_call_failure",
    "tool_call_started", "tool_call_done", "user_client_attached", "user_client_detached", "user_value_changed",
]

#: every hook of the spec, with the number of arguments before the execution context
HOOK_ARITY: dict[str, int] = {
    "after_thread_created": 1,
    "after_subagent_created": 2,
    "after_system_message": 2,
    "filter_messages": 2,
    "prefilter_llm_history": 2,
    "before_create_message": 2,
    "after_create_message": 2,
    "before_update_message": 3,
    "after_update_message": 2,
    "before_store_tool_result": 3,
    "after_tool_call_success": 3,
    "after_tool_call_failure": 3,
    "tool_call_started": 3,
    "tool_call_done": 3,
    "user_client_attached": 2,
    "user_client_detached": 2,
    "user_value_changed": 2,
}
HOOK_NAMES = frozenset(HOOK_ARITY)
USER_HOOK_NAMES = frozenset({"user_client_attached", "user_client_detached", "user_value_changed"})
THREAD_HOOK_NAMES = HOOK_NAMES - USER_HOOK_NAMES


class HookDefinition(Definition):
    """One hook implementation, referenced by its ``id`` from prompts and agents."""

    hook: str
    id: str
    execute: Callable[..., Any]
    #: how many positional arguments ``execute`` accepts (fewer than the spec's are allowed)
    accepts: int = 99

    async def call(self, *args: Any) -> Any:
        """Call with as many arguments as the handler takes; awaits coroutines."""
        result = self.execute(*args[: self.accepts])
        if inspect.isawaitable(result):
            result = await result
        return result


def _accepts(func: Callable[..., Any]) -> int:
    params = inspect.signature(func).parameters.values()
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return 99
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


@overload
def define_hook(definition: HookName, /, *, id: str | None = None) -> Callable[[Callable[..., Any]], HookDefinition]: ...
@overload
def define_hook(*, hook: HookName, id: str, execute: Callable[..., Any]) -> HookDefinition: ...
@overload
def define_hook(definition: Mapping[str, Any] | tuple[HookName, Callable[..., Any]], /) -> HookDefinition: ...
def define_hook(
    definition: Mapping[str, Any] | tuple[str, Callable[..., Any]] | list[Any] | str | None = None,
    /,
    *,
    hook: str | None = None,
    id: str | None = None,
    execute: Callable[..., Any] | None = None,
) -> HookDefinition | Callable[[Callable[..., Any]], HookDefinition]:
    """Define a hook.

    ``define_hook(hook="filter_messages", id="keep_recent", execute=fn)``, the dict form,
    the spec's deprecated ``(name, fn)`` tuple (its id is the function's name), or as a
    decorator: ``@define_hook("filter_messages", id="keep_recent")``.
    """
    if isinstance(definition, str):
        hook_name = definition

        def decorator(func: Callable[..., Any]) -> HookDefinition:
            return _build({"hook": hook_name, "id": id or func.__name__, "execute": func})

        return decorator
    data: dict[str, Any] = {}
    if isinstance(definition, tuple | list):
        name, func = definition
        data = {"hook": name, "id": getattr(func, "__name__", name), "execute": func}
    elif isinstance(definition, Mapping):
        data = dict(definition)
    for key, value in (("hook", hook), ("id", id), ("execute", execute)):
        if value is not None:
            data[key] = value
    return _build(data)


def _build(data: dict[str, Any]) -> HookDefinition:
    problems: list[tuple[str, str]] = []
    if data.get("hook") not in HOOK_NAMES:
        problems.append(("hook", f"{data.get('hook')!r} is not a hook of the spec; known hooks: {', '.join(sorted(HOOK_NAMES))}"))
    if isinstance(data.get("id"), str) and (bad := check_snake_case(data["id"])):
        problems.append(("id", bad))
    fn = data.get("execute")
    if callable(fn):
        data["accepts"] = _accepts(fn)
    elif "execute" not in data:
        problems.append(("execute", "a hook needs an execute function"))
    try:
        result = HookDefinition.model_validate(data)
    except ValidationError as exc:
        problems = problems_from_validation(exc) + problems
        raise DefinitionError(problems, source=f"hook {data.get('id')!r}") from None
    if problems:
        raise DefinitionError(problems, source=f"hook {data.get('id')!r}")
    return result
