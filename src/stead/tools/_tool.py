"""``@tool``: a Python function as a tool a model can call and a run can recover.

A ``Tool`` wraps the function with everything the rest of stead needs to know about it:
its name and description for the model, its argument schema and validation, its
side-effect class (which decides what happens to a call that was in flight when a worker
died, docs/design.md guarantee 3), an optional reconcile function, and an approval policy.
It stays callable like the original function, so tools can be tested as plain functions.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import math
import re
from collections.abc import Awaitable, Callable
from typing import Any, Generic, ParamSpec, TypeAlias, TypedDict, TypeVar, Unpack, overload

from pydantic import BaseModel

from stead.core.canonical import digest
from stead.core.decide import ToolSpec
from stead.core.effects import ToolFailed, ToolOutcome, ToolSucceeded
from stead.core.events import EFFECT_CLASSES, EffectClass
from stead.core.messages import ToolSchema
from stead.core.result_bound import check_max_result
from stead.errors import UserError
from stead.tools._answer import AnswerSpec
from stead.tools._arguments import ArgumentParser, InvalidArguments
from stead.tools._bounded import ToolTimedOut, run_bounded
from stead.tools._context import ToolContext
from stead.tools._fixed import Fixed
from stead.tools._queue import check_queue
from stead.tools._results import Done, NotDone, ReconcileAnswer, Unknown, serialize_result
from stead.tools._signature import (
    ReconcileShape,
    bind,
    describe_handler,
    describe_reconcile,
)

P = ParamSpec("P")
R = TypeVar("R")

Reconciler: TypeAlias = Callable[..., ReconcileAnswer | Awaitable[ReconcileAnswer]]
"""A status check called with (a subset of) the tool's arguments and optionally a
``ToolContext``; sync or async. Returns ``Done``, ``NotDone`` or ``Unknown``."""

ApprovalPolicy: TypeAlias = Callable[[dict[str, Any]], bool]
"""Decides from the validated arguments (by parameter name) whether a person must approve."""

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what both Anthropic and OpenAI accept

NO_QUESTION: Any = object()
"""``asks``'s default: the tool runs its function; it asks no one."""


def _first_paragraph(fn: Callable[..., Any]) -> str:
    doc = inspect.getdoc(fn) or ""
    return " ".join(doc.strip().split("\n\n", 1)[0].split())


def check_options(effect: object, reconcile: object, requires_approval: object, what: str) -> None:
    if effect not in EFFECT_CLASSES:
        raise UserError(
            f"{what}: effect must be one of {', '.join(EFFECT_CLASSES)}, not {effect!r}"
        )
    if reconcile is not None and effect != "non_idempotent":
        raise UserError(
            f"{what}: reconcile is only for effect='non_idempotent'; a {effect} call in flight "
            "at a crash is simply run again, so a reconcile function would never be asked"
        )
    if not isinstance(requires_approval, bool) and not callable(requires_approval):
        raise UserError(
            f"{what}: requires_approval must be a bool or a function of the arguments dict, "
            f"not {type(requires_approval).__name__}"
        )


def _check_bounds(
    effect: object, reconcile: object, timeout: object, retries: object, what: str
) -> None:
    """``timeout`` and ``retries``: numbers that make sense, and no blind retry of a call
    that may have taken effect."""
    if timeout is not None and (
        not isinstance(timeout, int | float)
        or isinstance(timeout, bool)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise UserError(
            f"{what}: timeout must be a positive number of seconds (None for no limit), "
            f"not {timeout!r}"
        )
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
        raise UserError(f"{what}: retries must be an int of at least 0, not {retries!r}")
    if retries and effect == "non_idempotent" and reconcile is None:
        raise UserError(
            f"{what}: retries of a non_idempotent tool need a reconcile function, to tell "
            "whether a failed attempt took effect before it runs again (stead never retries "
            "such a call blindly); pass reconcile=..., or declare effect='idempotent_write' "
            "if a repeat is harmless"
        )


def _check_asks(asks: object, reconcile: object, requires_approval: object, what: str) -> None:
    if asks is NO_QUESTION:
        return
    if requires_approval is not False or reconcile is not None:
        raise UserError(
            f"{what}: a question tool (asks=...) already waits on a person; it takes no "
            "requires_approval and no reconcile"
        )


def _check_spec(
    effect: object,
    reconcile: object,
    requires_approval: object,
    queue: object,
    timeout: object,
    retries: object,
    asks: object,
    what: str,
) -> EffectClass:
    """Every option check, for ``Tool`` and for ``@tool(...)`` before it meets a function;
    the effect class the tool gets (a question tool's is ``read_only``: its function only
    words the question, so asking again is safe)."""
    check_options(effect, reconcile, requires_approval, what)
    check_queue(queue, what)
    _check_asks(asks, reconcile, requires_approval, what)
    checked: EffectClass = "read_only" if asks is not NO_QUESTION else effect  # type: ignore[assignment]
    _check_bounds(checked, reconcile, timeout, retries, what)
    return checked


class ToolOptions(TypedDict, total=False):
    """The options ``@tool(...)`` takes, each as ``Tool`` takes it (see ``tool``)."""

    effect: EffectClass
    reconcile: Reconciler | None
    name: str | None
    description: str | None
    requires_approval: bool | ApprovalPolicy
    queue: str | None
    timeout: float | None
    retries: int
    asks: Any
    max_result: int | None


@functools.lru_cache(maxsize=1024)
def _is_async(fn: Callable[..., Any]) -> bool:
    """``inspect.iscoroutinefunction``, asked once per function (it is on every call's path)."""
    return inspect.iscoroutinefunction(fn)


async def _call(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> Any:
    """Await an async function; run a sync one in a worker thread so the loop keeps going."""
    if _is_async(fn):
        return await fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)


class Tool(Generic[P, R]):
    """A function the model can call, with its schema, side-effect class and recovery.

    Built by ``@tool``. Its public attributes are read-only: a tool's definition is part
    of what a run recorded (``definition_digest``), so it is not changed in place.
    """

    _max_result: int | None = None
    """Unless a constructor sets it: a tool made another way (a subclass of its own) keeps
    the agent's bound."""

    def __init__(
        self,
        fn: Callable[P, R],
        *,
        effect: EffectClass = "non_idempotent",
        reconcile: Reconciler | None = None,
        name: str | None = None,
        description: str | None = None,
        requires_approval: bool | ApprovalPolicy = False,
        queue: str | None = None,
        timeout: float | None = None,
        retries: int = 0,
        asks: Any = NO_QUESTION,
        max_result: int | None = None,
    ) -> None:
        """See ``tool``."""
        if isinstance(fn, Tool):
            raise UserError(f"{fn.name!r} is already a tool; apply @tool once")
        if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
            raise UserError(
                f"@tool decorates a function, not {type(fn).__name__} {fn!r}; "
                "to pass options write @tool(name=...)"
            )
        what = f"@tool {fn.__qualname__}"
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            raise UserError(f"{what}: a generator cannot be a tool; return the whole result")
        effect = _check_spec(
            effect, reconcile, requires_approval, queue, timeout, retries, asks, what
        )
        if max_result is not None:
            check_max_result(max_result, f"{what}: max_result")
        name = fn.__name__ if name is None else name
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise UserError(
                f"{what}: tool name {name!r} must be 1-64 letters, digits, '_' or '-' "
                "(what model providers accept); pass name=..."
            )
        shape = describe_handler(fn, what)
        self._fn: Callable[P, R] = fn
        self._name = name
        self._description = _first_paragraph(fn) if description is None else description
        self._effect: EffectClass = effect
        self._reconcile = reconcile
        self._reconcile_shape: ReconcileShape | None = (
            None if reconcile is None else describe_reconcile(reconcile, shape, what)
        )
        self._requires_approval = requires_approval
        self._queue = queue
        self._timeout: float | None = timeout
        self._max_result = max_result
        self._retries = retries
        self._asks = None if asks is NO_QUESTION else AnswerSpec(asks, what)
        self._shape = shape
        self._awaited = _is_async(fn)
        """An async handler: ``invoke`` awaits it in its own frame (a sync one runs in a
        worker thread)."""
        self._parser = ArgumentParser(name, shape.model, shape.parameters)
        self._digest = digest(
            {
                "name": name,
                "description": self._description,
                "parameters": shape.parameters,
                "effect_class": effect,
            }
        )
        functools.update_wrapper(self, fn, updated=())

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Call the original function directly (no validation, no context injection)."""
        return self._fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Tool {self._name!r} {self._effect}>"

    @property
    def fn(self) -> Callable[P, R]:
        """The decorated function."""
        return self._fn

    name = Fixed[str]("_name", "The name the model calls it by.")
    description = Fixed[str](
        "_description", "What it does, for the model: the docstring's first paragraph unless given."
    )
    effect_class = Fixed[EffectClass](
        "_effect", "Side-effect class; decides how a call in flight at a crash is recovered."
    )
    reconcile = Fixed[Reconciler | None](
        "_reconcile", "The status-check function for in-flight ``non_idempotent`` calls, if any."
    )
    requires_approval = Fixed[bool | ApprovalPolicy](
        "_requires_approval",
        "True, False, or a policy of the validated arguments (see ``needs_approval``).",
    )
    queue = Fixed[str | None](
        "_queue",
        "The executor queue its calls go to while a pool (``stead executor --queues``) serves "
        "it; None (the default): always in the run's own process.",
    )
    timeout = Fixed[float | None](
        "_timeout",
        "Seconds one attempt may take before it is aborted through its signal (None: no "
        "limit); a timed-out attempt is a failure, retried like any other.",
    )
    max_result = Fixed[int | None](
        "_max_result",
        "Characters of a result a run keeps (None: the agent's Limits.max_tool_result); a "
        "longer one is cut with a note the model reads.",
    )
    retries = Fixed[int](
        "_retries",
        "How many times a failed attempt is run again (with backoff; each one recorded).",
    )
    asks = Fixed[AnswerSpec | None](
        "_asks", "For a question tool, the answer it waits for; None for a tool that runs."
    )
    definition_digest = Fixed[str](
        "_digest",
        "sha256 of name, description, parameters and effect class: an executor refuses a call "
        "recorded against a different definition.",
    )

    @property
    def parameters(self) -> dict[str, Any]:
        """JSON schema of the argument object (a fresh copy each time)."""
        return copy.deepcopy(self._shape.parameters)

    @property
    def source(self) -> Any:
        """Where the tool came from when it is not a local function (an MCP server's
        ``MCPTools``), else None: a run records a source's listing (``tools_listed``)."""
        return None

    @property
    def spec(self) -> ToolSpec:
        """What the core needs to know of this tool."""
        return ToolSpec(
            effect_class=self._effect,
            has_reconcile=self._reconcile is not None,
            asks=self._asks is not None,
        )

    def schema(self) -> ToolSchema:
        """The tool as the model sees it."""
        return ToolSchema(
            name=self._name, description=self._description, parameters=self.parameters
        )

    def validate(self, raw_arguments: str) -> tuple[str, str | None]:
        """``(canonical_json, None)`` for usable arguments, else ``(raw_arguments, message)``.

        The canonical JSON is of the arguments as the model sent them, not with defaults
        filled in, so a later change of a default does not rewrite what was recorded. The
        message is written for the model to read and correct its call. Never raises.
        """
        try:  # kept for the run when the call runs next: no person asked, no question
            keep = self._requires_approval is False and self._asks is None
            _, canonical = self._parser.parse(raw_arguments, keep=keep)
        except InvalidArguments as exc:
            return raw_arguments, str(exc)
        return canonical, None

    def needs_approval(self, arguments_json: str) -> bool:
        """Whether this call must wait for a person. When in doubt, yes: a policy that
        raises or answers anything but a bool, or arguments that do not validate, ask."""
        policy = self._requires_approval
        if isinstance(policy, bool):
            return policy
        try:
            values = self._values(arguments_json)
            answer = policy(values)
        except Exception:
            return True
        return answer if isinstance(answer, bool) else True

    async def invoke(self, arguments_json: str, ctx: ToolContext) -> ToolOutcome:
        """Run the handler once; its exception becomes ``ToolFailed``. (``ToolUnknown`` is for
        a tool that cannot say whether its effect happened, an MCP server that died mid-call:
        the call stays in flight and is recovered as after a crash.)

        Cancellation (``asyncio.CancelledError``, ``stead.errors.Aborted``) is not an
        outcome and propagates. A sync handler runs in a worker thread, which cannot be
        interrupted: it should poll ``ctx.aborted`` if it runs long.
        """
        try:  # the canonical text the log recorded (validate() produced it)
            model = self._parser.parse_recorded(arguments_json)
        except InvalidArguments as exc:
            return ToolFailed(failure=str(exc))
        try:
            if self._timeout is None:
                # The handler's arguments from the validated model and the context, in one
                # pass (``_values`` then ``bind``, without the dict between them).
                args: list[Any] = []
                kwargs: dict[str, Any] = {}
                for p in self._shape.params:
                    value = ctx if p.is_context else getattr(model, p.field)
                    if p.positional_only:
                        args.append(value)
                    else:
                        kwargs[p.name] = value
                if self._awaited:  # awaited here: no _call frame
                    result = await self._fn(*args, **kwargs)  # type: ignore[misc]
                else:
                    result = await _call(self._fn, args, kwargs)
            else:
                values = self._values_of(model)
                result = await run_bounded(
                    lambda c: _call(self._fn, *bind(self._shape.params, values, c)),
                    ctx,
                    self._timeout,
                )
        except ToolTimedOut as exc:
            return ToolFailed(failure=str(exc))
        except Exception as exc:
            text = str(exc)
            return ToolFailed(
                failure=f"{type(exc).__name__}: {text}" if text else type(exc).__name__
            )
        return ToolSucceeded(content=serialize_result(result))

    async def reconcile_call(self, arguments_json: str, ctx: ToolContext) -> ReconcileAnswer:
        """Ask the reconcile function whether an in-flight call happened.

        A ``Done`` comes back with its result already serialized (a ``str``). Anything that
        is not a clear answer (no reconcile function, arguments that no longer validate,
        an exception, a wrong return type) is ``Unknown``: never guess "not done".
        """
        if self._reconcile is None or self._reconcile_shape is None:
            return Unknown(reason=f"tool {self._name!r} has no reconcile function")
        try:
            values = self._values(arguments_json)
        except InvalidArguments as exc:
            return Unknown(reason=f"the recorded arguments do not validate: {exc}")
        shape = self._reconcile_shape
        args, kwargs = bind(shape.params, values, ctx, rest=shape.takes_rest)
        try:
            answer = await _call(self._reconcile, args, kwargs)
        except Exception as exc:
            return Unknown(reason=f"reconcile raised {type(exc).__name__}: {exc}")
        if isinstance(answer, Done):
            return Done(serialize_result(answer.result))
        if isinstance(answer, NotDone | Unknown):
            return answer
        return Unknown(
            reason=f"reconcile returned {type(answer).__name__}; "
            "it must return Done(result), NotDone() or Unknown(reason)"
        )

    def _values(self, arguments_json: str) -> dict[str, Any]:
        # Called with the canonical text the log recorded (validate() produced it).
        return self._values_of(self._parser.parse_recorded(arguments_json))

    def _values_of(self, model: BaseModel) -> dict[str, Any]:
        return {p.name: getattr(model, p.field) for p in self._shape.params if not p.is_context}


@overload
def tool(
    fn: Callable[P, R],
    /,
    *,
    effect: EffectClass = "non_idempotent",
    reconcile: Reconciler | None = None,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool | ApprovalPolicy = False,
    queue: str | None = None,
    timeout: float | None = None,
    retries: int = 0,
    asks: Any = NO_QUESTION,
    max_result: int | None = None,
) -> Tool[P, R]: ...


@overload
def tool(
    *,
    effect: EffectClass = "non_idempotent",
    reconcile: Reconciler | None = None,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool | ApprovalPolicy = False,
    queue: str | None = None,
    timeout: float | None = None,
    retries: int = 0,
    asks: Any = NO_QUESTION,
    max_result: int | None = None,
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...


def tool(
    fn: Callable[P, R] | None = None, /, **options: Unpack[ToolOptions]
) -> Tool[P, R] | Callable[[Callable[P, R]], Tool[P, R]]:
    """Make a function a tool: ``@tool`` or ``@tool(effect=..., reconcile=..., ...)``.

    ``effect`` defaults to ``"non_idempotent"``, the one class that is safe when wrong: a
    call in flight at a crash is never run again blindly (it is reconciled or a person is
    asked). Declaring ``read_only`` or ``idempotent_write`` is a promise that running the
    call twice is harmless, so stead lets you make it rather than assuming it.

    ``timeout`` bounds each attempt (seconds): past it the call is aborted through its
    signal, as a cancel is (``ctx.run_subprocess`` groups killed), and the attempt failed.
    ``retries`` runs a failed attempt again with backoff, each failure recorded
    (``tool_attempt_failed``); a ``non_idempotent`` tool needs a ``reconcile`` function for
    that, asked before every retry whether the failed attempt took effect.

    ``max_result`` bounds the characters of its result a run keeps (the agent's
    ``Limits.max_tool_result``, 1,000,000, when None): a longer one is cut, with a note the
    model reads, before it is recorded (``stead.core.result_bound``).

    ``asks`` makes a question for a person (LangGraph's ``interrupt()``): the function's
    return value is the question, the run waits in ``awaiting_approval``, and the answer,
    validated against the type given (``str``, a pydantic model...), is the call's result
    (``Runtime.answer``).
    """

    unknown = sorted(set(options) - set(ToolOptions.__annotations__))
    if unknown:  # with a function or without: a misspelt option is the caller's mistake
        raise UserError(
            f"@tool(...) takes no option {unknown[0]!r}; its options: "
            + ", ".join(ToolOptions.__annotations__)
        )

    def decorate(f: Callable[P, R]) -> Tool[P, R]:
        return Tool(f, **options)

    if fn is not None:
        return decorate(fn)
    # checked here too, so a wrong option fails at @tool(...), not when it meets a function
    _check_spec(
        options.get("effect", "non_idempotent"),
        options.get("reconcile"),
        options.get("requires_approval", False),
        options.get("queue"),
        options.get("timeout"),
        options.get("retries", 0),
        options.get("asks", NO_QUESTION),
        "@tool(...)",
    )
    if options.get("max_result") is not None:
        check_max_result(options["max_result"], "@tool(...): max_result")
    return decorate


def question_tool(
    answer: Any = str, *, name: str = "ask_user", description: str | None = None
) -> Tool[..., str]:
    """A tool the model calls to ask the person a question; the answer is its result.

    ``answer`` is the answer's type (``str`` by default; a pydantic model, a dataclass, a
    ``TypedDict``, ``Literal[...]``...): ``Runtime.answer`` refuses one that does not fit,
    and the run keeps waiting. For a question worded from other arguments, decorate a
    function that returns the question with ``@tool(asks=...)`` instead.
    """

    def ask(question: str) -> str:
        """Ask the user a question and wait for their answer. Use it when you need a
        decision or a fact only the user has."""
        return question

    return Tool(ask, name=name, description=description, asks=answer)
