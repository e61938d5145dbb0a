"""Tool definitions: a typed function, or an explicit JSON Schema / Pydantic model plus a handler.

A tool's arguments are validated before it runs, so handlers see clean values and the model
gets a precise error to act on instead of a crash.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any, TypedDict, Unpack, get_type_hints, overload

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, create_model

from ..exceptions import DefinitionError
from ._base import Definition, check_snake_case
from ._tool_threads import TOOL_THREADS

__all__ = ["ToolDefinition", "ToolOptions", "define_tool"]

_STATE_NAMES = {"state", "thread_state"}


class ToolDefinition(Definition):
    """A callable the model may invoke.

    ``parameters`` is the JSON Schema offered to the model; arguments are validated against
    ``args_model`` when the tool came from Python types (fast, with coercion), else against
    the schema with ``jsonschema``.
    """

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    execute: Callable[..., Any]
    args_model: type[BaseModel] | None = None
    #: how ``execute`` is called: "kwargs" (typed function), "state_args" ((state, args)), "args" ((args))
    call_style: str = "kwargs"
    wants_state: bool = False
    #: the handler's parameter that receives the ThreadState (typed functions)
    state_param: str = "state"
    progress_argument: str | None = None
    needs_approval: bool = False
    guardrail: bool = False
    timeout: float | None = None
    #: running it twice does no harm: a call cut short by a crash is run again when its turn
    #: resumes (otherwise it is answered with an error and not run again)
    idempotent: bool = False
    #: "code" for project tools; "mcp" / "plugin" / "agent" for other origins
    origin: str = "code"
    origin_detail: str | None = None

    _validator: Any = PrivateAttr(default=None)
    _is_async: bool | None = PrivateAttr(default=None)

    def validate_arguments(self, args: dict[str, Any]) -> dict[str, Any]:
        """Return clean arguments or raise ``ValueError`` with every problem listed."""
        if self.args_model is not None:
            try:
                model = self.args_model.model_validate(args)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}" for e in exc.errors()
                )
                raise ValueError(problems) from None
            return {name: getattr(model, name) for name in type(model).model_fields}
        if self._validator is None:
            cls = jsonschema.validators.validator_for(self.parameters)
            object.__setattr__(self, "_validator", cls(self.parameters))
        errors = sorted(self._validator.iter_errors(args), key=lambda e: list(e.path))
        if errors:
            raise ValueError("; ".join(f"{'.'.join(str(p) for p in e.path) or '(arguments)'}: {e.message}" for e in errors))
        return args

    async def invoke(self, state: Any, args: dict[str, Any]) -> Any:
        """Call the handler in its own style.

        A coroutine function runs on the event loop. A plain function runs on a worker thread,
        so a blocking handler (``time.sleep``, a synchronous HTTP client, heavy computation)
        never freezes the loop: other threads' turns, live streams, ``stop`` and the
        heartbeat carry on meanwhile. When the call is given up (a timeout, a stop) the thread
        cannot be interrupted: it runs to its end in the background and its result is dropped
        (on a daemon thread that no other call waits for, so it never keeps the process from
        exiting; idle threads are reused, see :mod:`._tool_threads`).
        """
        if self.call_style == "kwargs":
            kwargs = {**args, self.state_param: state} if self.wants_state else args
            call = functools.partial(self.execute, **kwargs)
        elif self.call_style == "state_args":
            payload: Any = self.args_model.model_validate(args) if self.args_model else args
            call = functools.partial(self.execute, state, payload)
        else:
            payload = self.args_model.model_validate(args) if self.args_model else args
            call = functools.partial(self.execute, payload)
        result = call() if self._runs_on_loop() else await _in_thread(call, f"tool {self.name}")
        if inspect.isawaitable(result):
            result = await result
        return result

    def _runs_on_loop(self) -> bool:
        """Whether the handler is asynchronous (decided once per definition)."""
        known = self._is_async
        if known is None:
            fn = self.execute
            while isinstance(fn, functools.partial):
                fn = fn.func
            method = None if inspect.isroutine(fn) else type(fn).__dict__.get("__call__")  # a callable object
            known = inspect.iscoroutinefunction(fn) or (method is not None and inspect.iscoroutinefunction(method))
            object.__setattr__(self, "_is_async", known)
        return bool(known)

    def openai_tool(self) -> dict[str, Any]:
        """The chat-completions ``tools`` entry for this tool."""
        return {"type": "function", "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


class ToolOptions(TypedDict, total=False):
    """The options :func:`define_tool` takes besides the name, description, schema and handler."""

    progress_argument: str | None
    needs_approval: bool
    guardrail: bool
    timeout: float | None
    idempotent: bool
    #: where the tool came from, set by the runtime for MCP, plugin and agent tools
    origin: str
    origin_detail: str | None


#: a JSON Schema (a dict) or a Pydantic model class describing a tool's arguments
ToolSchema = Mapping[str, Any] | type[BaseModel]


async def _in_thread(call: Callable[[], Any], name: str) -> Any:
    """``call()`` on a daemon thread (with the caller's context variables), awaited."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(value: Any, error: BaseException | None) -> None:
        if done.done():  # the caller gave up (timeout, stop)
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(value)

    def run() -> Callable[[], None]:
        try:
            value, error = context.run(call), None
        except BaseException as exc:  # handed to the awaiting coroutine
            value, error = None, exc

        def hand_over() -> None:
            try:
                loop.call_soon_threadsafe(settle, value, error)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

        return hand_over

    TOOL_THREADS.submit(run, name)
    return await done


def _doc_params(func: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    import docstring_parser

    doc = docstring_parser.parse(inspect.getdoc(func) or "")
    summary = "\n\n".join(p for p in (doc.short_description, doc.long_description) if p)
    return summary, {p.arg_name: (p.description or "") for p in doc.params}


def _from_function(func: Callable[..., Any], name: str | None) -> dict[str, Any]:
    sig = inspect.signature(func)
    try:
        hints = get_type_hints(func)
    except Exception:  # forward refs to types the user did not import at runtime
        hints = {}
    summary, param_docs = _doc_params(func)
    fields: dict[str, Any] = {}
    wants_state = False
    state_param = "state"
    for pname, param in sig.parameters.items():
        annotation = hints.get(pname, param.annotation)
        ann_text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
        if pname in _STATE_NAMES or ann_text == "ThreadState":
            wants_state = True
            state_param = pname
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if annotation is inspect.Parameter.empty:
            annotation = Any
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (annotation, Field(default, description=param_docs.get(pname) or None))
    model = create_model(
        f"{(name or func.__name__).title().replace('_', '')}Args",
        __config__=ConfigDict(extra="forbid"),
        **fields,
    )
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return {
        "name": name or func.__name__,
        "description": summary,
        "parameters": schema,
        "execute": func,
        "args_model": model,
        "call_style": "kwargs",
        "wants_state": wants_state,
        "state_param": state_param,
    }


def _handler_style(execute: Callable[..., Any]) -> str:
    params = [p for p in inspect.signature(execute).parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return "state_args" if len(params) >= 2 else "args"


@overload
def define_tool(
    func: Callable[..., Any],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: ToolSchema | None = None,
    args: ToolSchema | None = None,
    **options: Unpack[ToolOptions],
) -> ToolDefinition: ...
@overload
def define_tool(
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: ToolSchema | None = None,
    args: ToolSchema | None = None,
    execute: Callable[..., Any],
    **options: Unpack[ToolOptions],
) -> ToolDefinition: ...
@overload
def define_tool(
    *,
    name: str | None = None,
    description: str | None = None,
    **options: Unpack[ToolOptions],
) -> Callable[[Callable[..., Any]], ToolDefinition]: ...
def define_tool(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: ToolSchema | None = None,
    args: ToolSchema | None = None,
    execute: Callable[..., Any] | None = None,
    **options: Any,
) -> ToolDefinition | Callable[[Callable[..., Any]], ToolDefinition]:
    """Define a tool.

    Three forms: ``@define_tool`` on a typed function (schema from its signature and
    docstring; a parameter named ``state`` receives the ``ThreadState``);
    ``@define_tool(name=..., progress_argument=..., needs_approval=...)`` with options; or
    ``define_tool(name=..., description=..., parameters=<JSON Schema or Pydantic model>,
    execute=handler)`` where the handler takes ``(state, args)`` or ``(args)``.
    """
    schema_source = parameters if parameters is not None else args

    def finish(data: dict[str, Any]) -> ToolDefinition:
        data.update({k: v for k, v in options.items()})
        if description is not None:
            data["description"] = description
        problems: list[tuple[str, str]] = []
        bad = check_snake_case(str(data.get("name", "")))
        if bad:
            problems.append(("name", bad))
        progress = data.get("progress_argument") or data.get("progressArgument")
        props = (data.get("parameters") or {}).get("properties", {})
        if progress and progress not in props:
            problems.append(("progress_argument", f"{progress!r} is not one of the tool's arguments ({', '.join(props) or 'none'})"))
        try:
            tool = ToolDefinition.model_validate(data)
        except ValidationError as exc:
            from ._base import problems_from_validation

            problems = problems_from_validation(exc) + problems
            raise DefinitionError(problems, source=f"tool {data.get('name')!r}") from None
        if problems:
            raise DefinitionError(problems, source=f"tool {data.get('name')!r}")
        return tool

    if execute is not None or schema_source is not None:
        handler = execute or func
        if handler is None:
            raise DefinitionError([("execute", "a tool needs a handler (execute=...)")], source=f"tool {name!r}")
        data: dict[str, Any] = {"name": name or getattr(handler, "__name__", ""), "execute": handler}
        if isinstance(schema_source, type) and issubclass(schema_source, BaseModel):
            schema = schema_source.model_json_schema()
            schema.pop("title", None)
            data.update(parameters=schema, args_model=schema_source)
        elif isinstance(schema_source, Mapping):
            try:
                jsonschema.validators.validator_for(schema_source).check_schema(schema_source)
            except jsonschema.SchemaError as exc:
                raise DefinitionError([("parameters", f"not a valid JSON Schema: {exc.message}")], source=f"tool {data['name']!r}") from None
            data["parameters"] = json.loads(json.dumps(dict(schema_source)))
        data["call_style"] = _handler_style(handler)
        if description is None and handler.__doc__:
            data["description"] = inspect.getdoc(handler) or ""
        return finish(data)

    if func is not None:
        return finish(_from_function(func, name))

    def decorator(f: Callable[..., Any]) -> ToolDefinition:
        return finish(_from_function(f, name))

    return decorator
