"""``@tool``: a notebook function becomes a ``ToolDefinition``.

Three shapes are accepted:

- a function whose single (non-injected) parameter is a pydantic model: the
  model is the schema; its docstring (else the function's) describes the tool;
  ``Field(description=...)`` describes the parameters;
- a plain function with type hints: a pydantic model is built from the
  signature (defaults kept, ``Annotated[..., Field(...)]`` respected), and the
  docstring (Google, NumPy or Sphinx, read by ``docstring_parser``) gives the
  tool description and the parameter descriptions;
- either of them ``async``.

Parameters named ``signal``, ``on_update``, ``ctx`` and ``tool_call_id`` are
injected by the tool runtime and left out of the schema. ``signal`` is never
``None`` (a fresh, never-aborted signal stands in); ``on_update(value)``
accepts anything a tool may return (a string, say) and streams it to the UI.

The decorated object is a ``FunctionTool`` (a ``ToolDefinition``) that is still
callable like the function: ``my_tool(city="Paris")`` in a cell calls it.
"""

from __future__ import annotations

import copy
import functools
import inspect
import re
import sys
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, overload

import docstring_parser
from pydantic import BaseModel, Field, create_model
from pydantic.fields import FieldInfo

from pi_kernel.agent.tool_execution import is_async_callable
from pi_kernel.agent.types import AgentToolResult, ToolExecutionMode
from pi_kernel.ai import AbortSignal, ConstrainedSampling
from pi_kernel.tools.definition import ToolApproval, ToolContext, ToolDefinition
from pi_kernel.tools.registry import ToolRegistry, get_default_registry
from pi_kernel.tools.results import to_agent_tool_result

INJECTED_PARAMETERS = frozenset({"signal", "on_update", "ctx", "tool_call_id"})
"""Parameter names filled by the runtime, never shown to the model."""

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What OpenAI-compatible APIs accept as a function name."""


class ParsedDocstring(NamedTuple):
    description: str
    """The summary and long description: everything before the first section."""
    params: dict[str, str]
    """Parameter name → its description (whitespace collapsed to single spaces)."""
    returns: str | None
    """The text of a Returns/Yields section or ``:returns:`` field."""


def parse_docstring(doc: str | None) -> ParsedDocstring:
    """Split ``doc`` (Google, NumPy or Sphinx style) into description, parameter descriptions and returns text."""
    parsed = docstring_parser.parse(doc or "")
    between = "\n\n" if parsed.blank_after_short_description else "\n"
    description = between.join(part for part in (parsed.short_description, parsed.long_description) if part)
    params = {
        name.strip().lstrip("*"): " ".join((param.description or "").split())
        for param in parsed.params
        for name in param.arg_name.split(",")  # ``x, y : float`` documents two parameters with one text
    }
    returns = " ".join(parsed.returns.description.split()) if parsed.returns and parsed.returns.description else None
    return ParsedDocstring(description, params, returns or None)


@dataclass(eq=False)
class FunctionTool(ToolDefinition):
    """A ``ToolDefinition`` made by ``@tool``; calling it calls the original function."""

    fn: Callable[..., Any] | None = None
    """The decorated function."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.fn is not None:
            functools.update_wrapper(self, self.fn, updated=())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.fn is None:
            raise TypeError(f'Tool "{self.name}" has no function to call')
        return self.fn(*args, **kwargs)


@dataclass(frozen=True, slots=True)
class _Argument:
    """How one parameter of the function is filled."""

    parameter: str
    """The function's parameter name."""
    source: str
    """An injected name, ``"*model"`` for the whole validated model, or the model field to read."""
    positional: bool
    """Positional-only in the function's signature."""


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    label: str | None = None,
    description: str | None = None,
    snippet: str | None = None,
    guidelines: str | Sequence[str] = (),
    execution_mode: ToolExecutionMode = "parallel",
    approval: ToolApproval = "auto",
    read_only: bool | None = None,
    max_retries: int = 3,
    registry: ToolRegistry | Literal[False] | None = None,
    render_call: Callable[[Any], Any] | None = None,
    render_result: Callable[[Any], Any] | None = None,
    prepare_arguments: Callable[[Any], Any] | None = None,
    constrained_sampling: bool | ConstrainedSampling = False,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    label: str | None = None,
    description: str | None = None,
    snippet: str | None = None,
    guidelines: str | Sequence[str] = (),
    execution_mode: ToolExecutionMode = "parallel",
    approval: ToolApproval = "auto",
    read_only: bool | None = None,
    max_retries: int = 3,
    registry: ToolRegistry | Literal[False] | None = None,
    render_call: Callable[[Any], Any] | None = None,
    render_result: Callable[[Any], Any] | None = None,
    prepare_arguments: Callable[[Any], Any] | None = None,
    constrained_sampling: bool | ConstrainedSampling = False,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Turn a function into a tool; use as ``@tool`` or ``@tool(name=..., ...)``.

    The options are ``ToolDefinition``'s fields (``snippet`` is ``prompt_snippet``, ``guidelines``
    ``prompt_guidelines``; an ``approval`` that cannot work raises here). ``registry``: where to register
    the tool (``None``: the default registry when one is set, see ``set_default_registry``; ``False``:
    nowhere). Redefining a tool with the same name replaces the old one.
    """
    options = dict(locals())  # the parameters as given
    target = options.pop("registry")
    options.pop("fn")
    # Names visible where the decorator is used, for string annotations of a function
    # defined inside another function (``from __future__ import annotations``).
    caller_namespace = sys._getframe(1).f_locals

    def decorate(function: Callable[..., Any]) -> FunctionTool:
        definition = _function_tool(function, caller_namespace, **options)
        where = get_default_registry() if target is None else target
        if where is not False and where is not None:
            where.add(definition)
        return definition

    return decorate(fn) if fn is not None else decorate


def _function_tool(
    fn: Callable[..., Any],
    local_namespace: dict[str, Any],
    *,
    name: str | None,
    description: str | None,
    snippet: str | None,
    guidelines: Sequence[str],
    **options: Any,
) -> FunctionTool:
    """The ``FunctionTool`` for ``fn``; ``local_namespace`` resolves string annotations its globals do not."""
    tool_name: str = name or str(getattr(fn, "__name__", ""))
    if not _TOOL_NAME.match(tool_name):
        raise ValueError(
            f"Invalid tool name {tool_name!r}: use 1-64 letters, digits, '_' or '-' (pass @tool(name=...))"
        )
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise TypeError(f'@tool "{tool_name}": generator functions are not supported; return the result instead')
    docs = parse_docstring(inspect.getdoc(fn))
    param_docs = {key: text for key, text in docs.params.items() if text}
    model, arguments = _parameters_model(fn, tool_name, param_docs, local_namespace)
    if description is None:
        uses_model = any(argument.source == "*model" for argument in arguments)
        model_doc = inspect.cleandoc(model.__doc__) if uses_model and model.__doc__ else ""
        description = model_doc or docs.description
    return FunctionTool(
        name=tool_name,
        description=description,
        parameters=model,
        execute=_make_execute(fn, model, arguments),
        prompt_snippet=snippet,
        prompt_guidelines=guidelines,
        fn=fn,
        origin="user",  # the user's own function: its origin, declared (approval.decide)
        **{key: value for key, value in options.items() if value is not None},
    )


def _parameters_model(
    fn: Callable[..., Any], tool_name: str, param_docs: dict[str, str], local_namespace: dict[str, Any] | None
) -> tuple[type[BaseModel], list[_Argument]]:
    """The schema model and how to fill each of ``fn``'s parameters from it."""
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn, localns=local_namespace, include_extras=True)
    except Exception as error:  # any failure to resolve hints gets the same clear message
        raise TypeError(f'@tool "{tool_name}": cannot resolve the type hints: {error}') from error
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(
                f'@tool "{tool_name}": *{parameter.name} / **{parameter.name} cannot be described to the model; '
                "declare each argument explicitly"
            )
    exposed = [name for name in signature.parameters if name not in INJECTED_PARAMETERS]
    annotation = hints.get(exposed[0]) if len(exposed) == 1 else None
    whole_model = isinstance(annotation, type) and issubclass(annotation, BaseModel)
    arguments: list[_Argument] = []
    fields: dict[str, Any] = {}
    taken = set(signature.parameters)
    for parameter in signature.parameters.values():
        if parameter.name in INJECTED_PARAMETERS:
            source = parameter.name
        elif whole_model:
            source = "*model"
        else:
            source = _field_name(parameter.name, taken)
            taken.add(source)
            annotation = hints.get(parameter.name, Any)
            fields[source] = (annotation, _field_info(parameter, annotation, source, param_docs))
        arguments.append(_Argument(parameter.name, source, parameter.kind is parameter.POSITIONAL_ONLY))
    if whole_model:
        return hints[exposed[0]], arguments
    try:
        model = create_model(_model_name(tool_name), **fields)
        model.model_json_schema()
    except Exception as error:  # pydantic raises several kinds for unsupported types
        raise TypeError(
            f'@tool "{tool_name}": its parameters cannot be described as JSON schema ({error}). '
            "Use JSON-friendly types (str, int, float, bool, list, dict, Literal, pydantic models)."
        ) from error
    return model, arguments


def _field_name(parameter: str, taken: set[str]) -> str:
    """A model field name for ``parameter``; the parameter itself becomes the alias when it
    would clash with pydantic (``json``, ``copy``, a leading underscore)."""
    if not parameter.startswith("_") and not hasattr(BaseModel, parameter):
        return parameter
    candidate = f"arg{parameter}" if parameter.startswith("_") else f"{parameter}_"
    while candidate in taken:
        candidate += "_"
    return candidate


def _field_info(parameter: inspect.Parameter, annotation: Any, field_name: str, param_docs: dict[str, str]) -> Any:
    doc = param_docs.get(parameter.name)
    alias = parameter.name if field_name != parameter.name else None
    default = parameter.default
    if isinstance(default, FieldInfo):
        info = copy.copy(default)
        if doc and not info.description:
            info.description = doc
        if alias:
            info.alias = alias
        return info
    options: dict[str, Any] = {}
    if doc and not _annotated_description(annotation):
        options["description"] = doc
    if alias:
        options["alias"] = alias
    return Field(... if default is parameter.empty else default, **options)


def _annotated_description(annotation: Any) -> bool:
    """Whether ``Annotated[..., Field(description=...)]`` already describes the parameter."""
    if typing.get_origin(annotation) is not typing.Annotated:
        return False
    return any(isinstance(extra, FieldInfo) and extra.description for extra in typing.get_args(annotation)[1:])


def _model_name(tool_name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[_-]+", tool_name) if part) + "Params"


def _make_execute(fn: Callable[..., Any], model: type[BaseModel], arguments: list[_Argument]) -> Callable[..., Any]:
    """``execute(tool_call_id, params, signal, on_update, ctx)``: sync for a sync ``fn``, async for async."""

    def call(
        tool_call_id: str,
        params: Any,
        signal: AbortSignal | None = None,
        on_update: Callable[[AgentToolResult], None] | None = None,
        ctx: ToolContext | None = None,
    ) -> Any:
        if not isinstance(params, model):
            params = model.model_validate(params)

        def update(value: Any) -> None:
            if on_update is not None:
                on_update(to_agent_tool_result(value))

        injected = {
            "tool_call_id": tool_call_id,
            "signal": signal if signal is not None else AbortSignal(),
            "on_update": update,
            "ctx": ctx if ctx is not None else ToolContext(),
            "*model": params,
        }
        values = {
            arg.parameter: injected[arg.source] if arg.source in injected else getattr(params, arg.source)
            for arg in arguments
        }
        positional = [values.pop(arg.parameter) for arg in arguments if arg.positional]
        return fn(*positional, **values)

    if is_async_callable(fn):

        async def execute_async(*args: Any, **kwargs: Any) -> AgentToolResult:
            return to_agent_tool_result(await call(*args, **kwargs))

        return execute_async

    def execute(*args: Any, **kwargs: Any) -> AgentToolResult:
        return to_agent_tool_result(call(*args, **kwargs))

    return execute
