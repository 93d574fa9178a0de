"""From a Python function's signature to an argument model and a JSON schema.

Every parameter becomes a field of a pydantic model built with ``create_model``: its type
hint is the field type, its default the field default, and ``Annotated[..., Field(...)]`` or
a ``Field(...)`` default carry descriptions and constraints. The parameter name is the
argument name the model uses. A parameter annotated ``ToolContext`` is not an argument: it
is left out of the model and injected when the function is called.

Fields get internal names (``p0``, ``p1``...) with the parameter name as alias, so a
parameter may be called anything a model may send (``json``, ``model_name``, ``_id``)
without colliding with pydantic's own attributes.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema

from stead.core.canonical import canonical_json
from stead.errors import UserError
from stead.tools._context import ToolContext


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter of a handler or reconcile function, and how to fill it."""

    name: str
    """The Python parameter name (and the argument name the model uses)."""
    field: str
    """The argument model's internal field name; '' for the context parameter."""
    positional_only: bool
    """Must be passed by position (declared before ``/``)."""
    is_context: bool
    """Annotated ``ToolContext``: injected, never validated."""


@dataclass(frozen=True, slots=True)
class HandlerShape:
    """What ``describe_handler`` learns from a handler."""

    params: tuple[Param, ...]
    """Its parameters, in declaration order."""
    model: type[BaseModel]
    """The argument model (``extra="forbid"``)."""
    parameters: dict[str, Any]
    """JSON schema of the argument object, as the model sees it."""


@dataclass(frozen=True, slots=True)
class ReconcileShape:
    """What ``describe_reconcile`` learns from a reconcile function."""

    params: tuple[Param, ...]
    """Its parameters, in declaration order."""
    takes_rest: bool
    """It has ``**kwargs``: every argument it does not name goes there."""


class _ToolJsonSchema(GenerateJsonSchema):
    """Leaves out per-field titles: they repeat the names and cost the model tokens."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _is_context(hint: object) -> bool:
    if typing.get_origin(hint) is Annotated:
        hint = typing.get_args(hint)[0]
    return hint is ToolContext or typing.get_origin(hint) is ToolContext  # ToolContext[Deps]


def _sets_alias(hint: object, default: object) -> bool:
    infos = [default, *(typing.get_args(hint)[1:] if typing.get_origin(hint) is Annotated else ())]
    return any(
        isinstance(i, FieldInfo)
        and (i.alias or i.validation_alias or i.serialization_alias) is not None
        for i in infos
    )


def _hints(fn: Callable[..., Any], what: str) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise UserError(
            f"{what}: cannot resolve its type hints ({type(exc).__name__}: {exc}); "
            "define the types it uses at module level"
        ) from exc


def _params(
    fn: Callable[..., Any], what: str, hints: Mapping[str, Any], *, allow_var_keyword: bool
) -> list[Param]:
    params: list[Param] = []
    for i, p in enumerate(inspect.signature(fn).parameters.values()):
        if p.kind is p.VAR_POSITIONAL or (p.kind is p.VAR_KEYWORD and not allow_var_keyword):
            raise UserError(
                f"{what}: *args and **kwargs cannot be described to a model; "
                f"declare each argument as its own parameter (found {p})"
            )
        if p.kind is p.VAR_KEYWORD:
            continue
        is_ctx = _is_context(hints.get(p.name))
        if is_ctx and any(q.is_context for q in params):
            raise UserError(f"{what}: only one parameter may be annotated ToolContext")
        params.append(
            Param(
                name=p.name,
                field="" if is_ctx else f"p{i}",
                positional_only=p.kind is p.POSITIONAL_ONLY,
                is_context=is_ctx,
            )
        )
    return params


def describe_handler(fn: Callable[..., Any], what: str) -> HandlerShape:
    """Build the argument model and schema of a handler; ``UserError`` when it cannot be."""
    hints = _hints(fn, what)
    params = _params(fn, what, hints, allow_var_keyword=False)
    signature = inspect.signature(fn).parameters
    fields: dict[str, Any] = {}
    for p in params:
        if p.is_context:
            continue
        default = signature[p.name].default
        hint = hints.get(p.name, Any)
        if _sets_alias(hint, default):
            raise UserError(
                f"{what}: parameter {p.name!r} sets an alias; the parameter name is the "
                "argument name the model uses, so rename the parameter instead"
            )
        fields[p.field] = (
            Annotated[hint, Field(alias=p.name)],
            ... if default is inspect.Parameter.empty else default,
        )
    try:
        model = create_model(
            f"{fn.__name__}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        )
        schema = model.model_json_schema(schema_generator=_ToolJsonSchema)
        canonical_json(schema)
    except (PydanticUserError, TypeError, ValueError) as exc:
        raise UserError(f"{what}: cannot build a JSON schema for its arguments: {exc}") from exc
    schema.pop("title", None)
    return HandlerShape(params=tuple(params), model=model, parameters=schema)


def describe_reconcile(fn: Callable[..., Any], handler: HandlerShape, what: str) -> ReconcileShape:
    """Check that a reconcile function can be called with the handler's arguments.

    It may name any subset of them (plus a ``ToolContext``), or take ``**kwargs``; a
    required parameter the handler does not have could never be filled.
    """
    if not inspect.isfunction(fn) and not inspect.ismethod(fn):
        raise UserError(f"{what}: reconcile must be a function, not {type(fn).__name__}")
    known = {p.name for p in handler.params if not p.is_context}
    signature = inspect.signature(fn).parameters
    params = _params(fn, what, _hints(fn, what), allow_var_keyword=True)
    for p in params:
        # A positional-only parameter left to its default would shift the ones after it.
        required = p.positional_only or signature[p.name].default is inspect.Parameter.empty
        if not p.is_context and p.name not in known and required:
            raise UserError(
                f"{what}: reconcile parameter {p.name!r} is not an argument of the tool "
                f"(its arguments: {', '.join(sorted(known)) or 'none'})"
            )
    takes_rest = any(q.kind is q.VAR_KEYWORD for q in signature.values())
    return ReconcileShape(params=tuple(params), takes_rest=takes_rest)


def bind(
    params: tuple[Param, ...], values: Mapping[str, Any], ctx: ToolContext, *, rest: bool = False
) -> tuple[list[Any], dict[str, Any]]:
    """Positional and keyword arguments for a call: ``values`` by name, ``ctx`` injected.

    A parameter with no value (a reconcile parameter the tool lacks) keeps its default;
    with ``rest`` every value no parameter named goes to ``**kwargs``.
    """
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for p in params:
        if p.is_context:
            value: Any = ctx
        elif p.name in values:
            value = values[p.name]
        else:
            continue
        if p.positional_only:
            args.append(value)
        else:
            kwargs[p.name] = value
    if rest:
        named = {p.name for p in params}
        kwargs.update({k: v for k, v in values.items() if k not in named})
    return args, kwargs
