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
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    ParamSpec,
    TypedDict,
    TypeVar,
    Unpack,
    get_type_hints,
    overload,
)

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, create_model

from ..exceptions import DefinitionError
from ._base import Definition, check_snake_case
from ._tool_threads import TOOL_THREADS
from .variables import (
    CAPABILITIES,
    Capability,
    NetworkFields,
    NetworkPolicy,
    TenvRawShape,
    VariableDefinition,
    VariableFields,
    check_variable_names,
)

__all__ = ["NotAToolOption", "ToolDefinition", "ToolOptions", "define_tool", "uses_of_annotation"]

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
    #: typed configuration values resolved from the env before each call (never shown to the model)
    variables: dict[str, VariableDefinition] = Field(default_factory=dict)
    #: env values the tool provides itself, read after every other env source
    tenvs: dict[str, Any] = Field(default_factory=dict)
    #: the state capabilities the tool uses; ``None`` (declared nothing) keeps the full state
    uses: tuple[Capability, ...] | None = None
    #: where the tool's ``state.fetch`` may go (declaring it adds ``network`` to ``uses``)
    network: NetworkPolicy | None = None

    _validator: Any = PrivateAttr(default=None)
    _is_async: bool | None = PrivateAttr(default=None)
    #: whether a call hands the handler a ToolState (decided once: the hot path reads a flag)
    _wraps_state: bool = PrivateAttr(default=False)

    def model_post_init(self, context: Any, /) -> None:
        receives = self.wants_state or self.call_style == "state_args"
        object.__setattr__(self, "_wraps_state", bool(receives and self.declares))

    @property
    def declares(self) -> bool:
        """Whether the runtime hands this tool a :class:`ToolState` (it declared variables,
        tenvs, uses or network) rather than the thread's state as is."""
        return bool(self.uses is not None or self.variables or self.tenvs)

    def declarations(self) -> dict[str, Any]:
        """What the tool declares it touches, for operators (tool listings, ``validate``,
        packed packages); empty when it declares nothing. Secrets stay hidden."""
        out: dict[str, Any] = {}
        if self.uses is not None:
            out["uses"] = list(self.uses)
        if self.variables:
            out["variables"] = {name: var.describe() for name, var in self.variables.items()}
        if self.tenvs:
            out["tenvs"] = sorted(self.tenvs)
        if self.network is not None:
            out["network"] = self.network.describe()
        return out

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

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the tool's function as plain Python (no argument validation, no thread state
        supplied): a function decorated with ``@define_tool`` stays callable, e.g. in tests."""
        return self.execute(*args, **kwargs)


_P = ParamSpec("_P")
_R = TypeVar("_R")

if TYPE_CHECKING:
    class TypedTool(ToolDefinition, Generic[_P, _R]):
        """What ``@define_tool`` makes of a function, for type checkers: a tool definition
        whose calls keep the function's signature."""

        def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R: ...


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
    #: typed configuration values (the spec's ``variables``), resolved from the env per call
    variables: Mapping[str, VariableDefinition | VariableFields]
    #: env values the tool provides itself (the spec's ``tenvs``)
    tenvs: TenvRawShape
    #: the state capabilities the tool uses (the spec's ``uses``)
    uses: list[Capability] | tuple[Capability, ...]
    #: the hosts its ``state.fetch`` may reach, limits, and credentials per host
    network: NetworkPolicy | NetworkFields | list[str]


#: a JSON Schema (a dict) or a Pydantic model class describing a tool's arguments
ToolSchema = Mapping[str, Any] | type[BaseModel]


class NotAToolOption:
    """The type a misspelt option of :func:`define_tool` meets, so that pyright names the
    keyword in its error (without it, pyright reports only that no overload matched)."""


if TYPE_CHECKING:
    class _AnyOptions(ToolOptions, total=False, extra_items=NotAToolOption):  # type: ignore[call-arg]
        """The options, and any other keyword typed as :class:`NotAToolOption` (PEP 728)."""


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
        if pname in _STATE_NAMES or ann_text == "ThreadState" or uses_of_annotation(annotation) is not None:
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


def uses_of_annotation(annotation: Any) -> frozenset[str] | None:
    """The capabilities a state Protocol stands for (``FilesUse``, or a Protocol combining
    several), or ``None`` when ``annotation`` is not one of the tool state Protocols."""
    if not isinstance(annotation, type):
        return None
    found: set[str] | None = None
    for base in annotation.__mro__:
        marked = base.__dict__.get("__sa_uses__")
        if marked is not None:
            found = (found or set()) | set(marked)
    return frozenset(found) if found is not None else None


def _state_annotation(data: dict[str, Any]) -> Any:
    """The annotation of the handler's parameter that receives the state, if any."""
    handler = data.get("execute")
    if handler is None:
        return None
    try:
        hints = get_type_hints(handler)
    except Exception:
        return None
    if data.get("call_style") == "kwargs":
        return hints.get(data.get("state_param", "state")) if data.get("wants_state") else None
    if data.get("call_style") == "state_args":
        params = [p for p in inspect.signature(handler).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        return hints.get(params[0].name) if params else None
    return None


def _declared(data: dict[str, Any], problems: list[tuple[str, str]]) -> None:
    """Normalise ``uses``/``network``/``variables`` and check them against the handler's
    state annotation: a handler typed for capabilities it did not declare is an error."""
    if "network" in data and isinstance(data["network"], list | tuple):
        data["network"] = {"allow": list(data["network"])}
    raw_uses = data.get("uses")
    if isinstance(raw_uses, str):
        raw_uses = [raw_uses]
    uses: list[str] | None = None if raw_uses is None else [str(u) for u in raw_uses]
    if uses is not None:
        unknown = [u for u in uses if u not in CAPABILITIES]
        if unknown:
            problems.append(("uses", f"{unknown[0]!r} is not a capability (known: {', '.join(CAPABILITIES)})"))
            uses = [u for u in uses if u in CAPABILITIES]
    typed = uses_of_annotation(_state_annotation(data))
    if typed is not None:
        if uses is None:
            uses = sorted(typed)
        else:
            missing = sorted(typed - set(uses))
            if missing:
                problems.append(("uses", f"the handler's state is typed for {', '.join(missing)}, which uses does not "
                                         f"declare ({', '.join(uses) or 'nothing'})"))
    if data.get("network") is not None:
        uses = [*(uses or []), "network"]
    elif uses is not None and "network" in uses:
        problems.append(("network", "uses declares 'network' but the tool names no hosts: add network={'allow': [...]}"))
    if uses is not None:
        data["uses"] = tuple(dict.fromkeys(uses))
    if isinstance(data.get("variables"), Mapping):
        problems.extend(check_variable_names(data["variables"]))


def _handler_style(execute: Callable[..., Any]) -> str:
    params = [p for p in inspect.signature(execute).parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return "state_args" if len(params) >= 2 else "args"


@overload
def define_tool(
    func: Callable[_P, _R],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: ToolSchema | None = None,
    args: ToolSchema | None = None,
    **options: Unpack[ToolOptions],
) -> TypedTool[_P, _R]: ...
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
) -> Callable[[Callable[_P, _R]], TypedTool[_P, _R]]: ...
@overload
def define_tool(  # only pyright reads its extra keywords (PEP 728): a misspelt option is named
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: ToolSchema | None = None,
    args: ToolSchema | None = None,
    execute: Callable[..., Any] | None = None,
    **options: Unpack[_AnyOptions],
) -> Any: ...
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
        _declared(data, problems)
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
