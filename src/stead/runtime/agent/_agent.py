"""Agent definitions: a name, a model, tools, a system prompt and the limits that bound it.

A run records only the agent's *name*; any process given an agent of that name can continue
the run. Keep an agent's tools and prompt stable across deploys, or give it a new name.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any, TypeVar

from stead.core.durability import MODES, Durability
from stead.core.limits import Budget, Limits
from stead.core.output import OUTPUT_TOOL
from stead.core.pricing import PriceTable
from stead.core.settings import NO_SETTINGS, ModelSettings
from stead.core.versions import POLICIES, VersionPolicy
from stead.errors import UserError
from stead.providers import FORMS, LazyModel, ModelProvider
from stead.runtime.agent import _checks as checks
from stead.runtime.agent._deps import check_deps_type
from stead.runtime.agent._output import OutputSpec
from stead.runtime.agent._parts import AgentParts, agent_parts
from stead.runtime.agent._versions import fingerprint_of
from stead.tools import Tool, ToolRegistry, check_queue


class Agent:
    """What drives a run: model, tools, system prompt, limits.

    ``model`` is a ``ModelProvider`` or a model string (``"anthropic:claude-sonnet-4-6"``,
    ``"openai:gpt-4.1"``, ``"openai-compatible:http://host:8000/v1:qwen3"``; see
    ``stead.providers.model_from_string``). A string is read here and made into a provider at
    the first model call, so building an Agent needs no API key and imports no SDK.

    Every argument is checked here: a wrong one is a ``UserError`` naming what to pass, at the
    line that built the Agent, not an ``AttributeError`` halfway through a run.
    """

    def __init__(
        self,
        name: str,
        model: ModelProvider | str,
        tools: Iterable[Tool[..., Any]] = (),
        system: str = "",
        *,
        limits: Limits | None = None,
        budget: Budget | None = None,
        max_output_tokens: int | None = None,
        prices: PriceTable | None = None,
        output_type: Any = None,
        deps_type: type[Any] | None = None,
        settings: ModelSettings | None = None,
        model_queue: str | None = None,
        durability: Durability = "strict",
        version: str | None = None,
        on_change: VersionPolicy = "continue",
    ) -> None:
        """``output_type`` (a pydantic model, dataclass, TypedDict, ``list[...]``...) makes the
        run's answer a validated value (``RunView.data``) instead of text; ``deps_type`` is
        the type of ``Runtime(deps=...)`` its tools read as ``ctx.deps``; ``settings`` are
        its model settings (a run's own, ``Runtime.start(settings=...)``, win); ``durability``
        is ``"strict"`` (every step on disk before the next) or ``"effects"`` (only the
        commits an effect outside the log depends on wait for the disk: see
        ``stead.core.durability`` and docs/durability.md). ``version`` labels this
        definition (it joins the fingerprint a run records); ``on_change`` says what a run
        recorded under another fingerprint does when this one takes it: ``"continue"``,
        ``"pin"`` or ``"fail"`` (docs/lifecycle.md)."""
        if not name or not isinstance(name, str):
            raise UserError("an Agent needs a non-empty name: runs find their agent by it")
        checks.identifier("the Agent's name", name)
        self.name = name
        self.model: ModelProvider = _model(name, model)
        self.registry = ToolRegistry(tools)
        self.system = checks.text(f"Agent {name!r}: system", system)
        self.limits = _instance(name, "limits", limits, Limits) or Limits()
        self.budget = _instance(name, "budget", budget, Budget) or Budget()
        if max_output_tokens is not None and (
            not isinstance(max_output_tokens, int)
            or isinstance(max_output_tokens, bool)
            or max_output_tokens < 1
        ):
            raise UserError(
                f"Agent {name!r}: max_output_tokens takes an int of at least 1 (or None), "
                f"not {type(max_output_tokens).__name__} {max_output_tokens!r:.40}"
            )
        self.max_output_tokens = max_output_tokens
        self.prices = _instance(name, "prices", prices, PriceTable) or PriceTable()
        self.settings = _instance(name, "settings", settings, ModelSettings) or NO_SETTINGS
        self.output: OutputSpec[Any] | None = OutputSpec.of(name, output_type)
        self.output_type = output_type
        if self.output is not None and self.registry.get(OUTPUT_TOOL) is not None:
            raise UserError(
                f"Agent {name!r}: a tool is named {OUTPUT_TOOL!r}, the tool an output_type is "
                "answered with; rename the tool"
            )
        self.deps_type = check_deps_type(name, deps_type, self.registry)
        check_queue(model_queue, f"Agent {name!r}: model_queue")
        self.model_queue = model_queue
        if durability not in MODES:
            raise UserError(
                f"Agent {name!r}: durability takes one of {', '.join(map(repr, MODES))}, "
                f"not {durability!r:.40}"
            )
        self.durability: Durability = durability
        if version is not None:
            checks.identifier(f"Agent {name!r}: version", version)
        self.version = version
        if on_change not in POLICIES:
            raise UserError(
                f"Agent {name!r}: on_change takes one of {', '.join(map(repr, POLICIES))}, "
                f"not {on_change!r:.40}"
            )
        self.on_change: VersionPolicy = on_change
        """Which commits of its runs wait for the disk (``stead.core.durability``)."""
        """The executor queue of this agent's model calls (``stead executor --queues``),
        while a pool serves it; None: in the run's own process."""
        if self.budget.max_usd is not None and self.prices.get(self.model.model_name) is None:
            raise UserError(
                f"a dollar budget needs a price for model {self.model.model_name!r}; pass "
                "prices=PriceTable({name: Price(...)}) to the Agent"
            )

    loaded_from: tuple[str, str | None] | None = None
    """The ``--agents`` and ``--deps`` (``module:attr`` each, or None) a process loaded this
    agent with: the CLI sets it, and each run it starts records it (``LOADED_FROM`` in the
    run's config), so a command printed for the run later, by a process that has no agents
    (``stead runs show``), names them and works as printed. None for an agent built in code."""

    observer: Any = None
    """An ``Observer`` (``stead.runtime.Observer``) every drive of this agent's runs has,
    beside the Runtime's own: how an agent of another framework (``stead.pydantic_ai``) runs
    in step with the run loop. None for a native agent."""

    end_check: Any = None
    """Asked before a reply that would end a run is recorded, when set:
    ``await end_check(turn_index, message, usage, model)`` gives the agent's own verdict on
    the answer, ``Ended(value)`` (its output) or ``EndRetry(message)`` (the model answers
    again), recorded in the reply's commit (``stead.foreign``: a Pydantic AI agent's output
    validators). None: the answer is judged by ``output_type`` alone."""

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, tools={self.registry.names()})"

    @functools.cached_property
    def fingerprint(self) -> str:
        """This definition's version: a digest of its tools (names, schemas, effect
        classes), instructions, model, output type and ``version`` label."""
        return fingerprint_of(self)

    @functools.cached_property
    def _parts(self) -> AgentParts:
        """Its tools as every run uses them (specs, schemas), worked out at its first run."""
        return agent_parts(self.registry, self.output)


T = TypeVar("T")


def _instance(agent: str, what: str, value: object, cls: type[T]) -> T | None:
    """None, or an instance of ``cls``; a ``UserError`` saying what to pass otherwise."""
    if value is None or isinstance(value, cls):
        return value
    raise UserError(
        f"Agent {agent!r}: {what} takes a stead.{cls.__name__}(...) (or None), "
        f"not {type(value).__name__}"
    )


LOADED_FROM = "loaded_from"
"""The key of a run's config that holds its agent's ``Agent.loaded_from``."""


def with_loaded_from(config: dict[str, Any] | None, agent: Agent | None) -> dict[str, Any] | None:
    """``config`` with ``agent.loaded_from`` in it, when the agent has one."""
    if agent is None or agent.loaded_from is None:
        return config
    agents, deps = agent.loaded_from
    return {**(config or {}), LOADED_FROM: {"agents": agents, "deps": deps}}


def loaded_from(config: dict[str, Any]) -> tuple[str, str | None] | None:
    """The ``--agents`` and ``--deps`` a run's config records, if any (``with_loaded_from``)."""
    found = config.get(LOADED_FROM)
    if not isinstance(found, dict) or not isinstance(found.get("agents"), str):
        return None
    deps = found.get("deps")
    return found["agents"], deps if isinstance(deps, str) else None


def _model(agent: str, model: object) -> ModelProvider:
    """A provider, or the ``LazyModel`` a model string names."""
    if isinstance(model, str):
        return LazyModel(model)
    if not isinstance(model, ModelProvider):
        raise UserError(
            f"Agent {agent!r}: model takes a model string ({FORMS}) or a ModelProvider "
            f"(AnthropicModel, OpenAIModel, ScriptedModel...), not {type(model).__name__}"
        )
    if not isinstance(model.model_name, str):
        raise UserError(
            f"Agent {agent!r}: the model's model_name must be a str (it prices the run), "
            f"not {type(model.model_name).__name__}"
        )
    return model
