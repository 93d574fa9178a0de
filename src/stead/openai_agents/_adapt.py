"""An ``agents.Agent`` as the ``stead.Agent`` that stands for it (``durable``).

The stead agent's tools are ``stead.foreign`` tools with the effect class, reconcile,
timeout and approval of each SDK function tool; its runs launch the SDK's own ``Runner`` on a
copy of the agent whose model is journaled (``JournaledModel``) and whose function tools hand
each invocation to the journal: intent in the log before the tool runs, the result recorded
by call id, the SDK given back only what the log recorded. Every agent reachable by handoff
is copied alike (``_handoffs``), and the SDK reads the conversation before the run's input
from a ``SteadSession`` over the log.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, TypedDict, TypeVar, cast

from agents import Agent as SdkAgent
from agents import FunctionTool, Model, RunConfig, Runner
from agents.items import ToolApprovalItem
from agents.tool_context import ToolContext as SdkToolContext

from stead.core.durability import Durability
from stead.core.effects import ToolFailed, ToolSucceeded
from stead.core.events import EffectClass, ToolResultRecorded
from stead.core.limits import Budget, Limits
from stead.core.pricing import PriceTable
from stead.errors import UserError
from stead.foreign import Journal, Launch, current_journal, foreign_agent, foreign_tool
from stead.openai_agents._as_tool import agent_as_tool, nested_agent
from stead.openai_agents._handoffs import handoff_tools, journaled_graph, reachable
from stead.openai_agents._model import JournaledModel, same_json
from stead.openai_agents._session import SteadSession
from stead.runtime import Agent
from stead.tools import Reconciler, Tool, serialize_result

_KEY = "_stead_settings"
_SDK_TURNS = 1_000_000
_OPTIONS = ("effect", "reconcile", "timeout", "retries")


class ToolSettings(TypedDict, total=False):
    """How stead runs and recovers one SDK tool (every key optional)."""

    effect: EffectClass
    """``read_only``, ``idempotent_write`` or ``non_idempotent`` (the default)."""
    reconcile: Reconciler
    """Asked whether a ``non_idempotent`` call in flight when its worker died happened."""
    timeout: float
    retries: int


F = TypeVar("F", bound=FunctionTool)


def effect(
    effect: EffectClass,
    *,
    reconcile: Reconciler | None = None,
    timeout: float | None = None,
    retries: int | None = None,
) -> Callable[[F], F]:
    """Give an SDK function tool its stead settings; put it above ``@function_tool``::

    @stead.openai_agents.effect("non_idempotent", reconcile=find_sent)
    @function_tool
    def send_message(to: str, text: str) -> str: ...
    """
    settings: ToolSettings = {"effect": effect}
    if reconcile is not None:
        settings["reconcile"] = reconcile
    if timeout is not None:
        settings["timeout"] = timeout
    if retries is not None:
        settings["retries"] = retries

    def mark(tool: F) -> F:
        if not isinstance(tool, FunctionTool):
            raise UserError(
                "stead.openai_agents.effect(...) goes above @function_tool, on the tool it makes"
            )
        setattr(tool, _KEY, settings)
        return tool

    return mark


def durable(
    agent: SdkAgent[Any],
    *,
    tools: Mapping[str, ToolSettings] | None = None,
    name: str | None = None,
    limits: Limits | None = None,
    budget: Budget | None = None,
    prices: PriceTable | None = None,
    durability: Durability = "strict",
    session: object = None,
) -> Agent:
    """The ``stead.Agent`` for an Agents SDK agent: give it to ``stead.Runtime(agents=[...])``
    or name it to the CLI (``module:attribute``). ``tools`` maps a tool's name to its
    settings, for tools without ``@effect``; a tool given neither is ``non_idempotent``.
    ``limits``, ``budget``, ``prices`` and ``durability`` are a ``stead.Agent``'s. An agent
    used as a tool (``agent.as_tool(...)``) becomes a child run per call (docs: "Agents as
    tools"). ``session`` is refused: a stead run's conversation is its log (``rt.send``)."""
    if session is not None:
        raise UserError(
            f"durable(session={type(session).__name__}(...)): a stead run keeps its "
            "conversation in its log, where a crash cannot leave it behind the run; send "
            "follow-ups with rt.send(conversation, text) and the SDK reads them through "
            "stead.openai_agents.SteadSession, which durable passes to Runner.run itself"
        )
    given = dict(tools or {})
    label = name or agent.name
    if not label:
        raise UserError("an Agents SDK agent run by stead needs a name: Agent(name='...')")
    build = _Build(given, limits, prices, durability)
    out = build.agent(agent, label, budget)
    unknown = sorted(set(given) - build.seen)
    if unknown:
        raise UserError(
            f"Agents SDK agent {label!r}: tools={unknown} names no tool of the agent "
            f"or of an agent it hands off to or uses as a tool (they have {sorted(build.seen)})"
        )
    return out


class _Build:
    """``durable`` of one agent and of every agent it uses as a tool, each once."""

    def __init__(
        self,
        given: dict[str, ToolSettings],
        limits: Limits | None,
        prices: PriceTable | None,
        durability: Durability,
    ) -> None:
        self.given = given
        self.seen: set[str] = set()
        """The names of every tool met, to say which names of ``given`` name none."""
        self.limits = limits
        self.prices = prices
        self.durability = durability
        self.built: dict[int, Agent] = {}

    def agent(self, agent: SdkAgent[Any], label: str, budget: Budget | None) -> Agent:
        graph = reachable(agent, label)
        model_name = ""
        stead_tools: list[Tool[..., Any]] = []
        by_name: dict[str, FunctionTool] = {}
        wrapped: dict[int, FunctionTool] = {}
        for sdk_agent, _ in graph:
            what = f"Agents SDK agent {sdk_agent.name!r}"
            model = sdk_agent.model
            if not isinstance(model, Model):
                raise UserError(
                    f"{what}: give it a model object (OpenAIChatCompletionsModel / "
                    f"OpenAIResponsesModel with its AsyncOpenAI client), not {model!r}; stead "
                    "wraps that model to journal each request"
                )
            model_name = model_name or _model_name(model)
            for tool in sdk_agent.tools:
                if not isinstance(tool, FunctionTool):
                    raise UserError(
                        f"{what}: {type(tool).__name__} tools are not supported under stead; "
                        "hosted tools run at the provider, where stead cannot write their "
                        "intent first or recover them by effect class; give the agent "
                        "function tools (@function_tool)"
                    )
                seen = by_name.get(tool.name)
                if seen is tool:
                    continue
                if seen is not None:
                    raise UserError(
                        f"{what}: two different tools are named {tool.name!r} among the agents "
                        f"{label!r} can hand off to; a run's tools are one set, so name them "
                        "apart"
                    )
                by_name[tool.name] = tool
                self.seen.add(tool.name)
                settings = _settings(sdk_agent.name, tool, self.given.get(tool.name))
                stead_tools.append(self._tool(what, tool, settings))
                wrapped[id(tool)] = _journaled_tool(tool)
        stead_tools.extend(handoff_tools(graph, set(by_name)))
        journal_agent = journaled_graph(
            graph,
            lambda a: a.clone(
                model=JournaledModel(cast(Model, a.model), _model_name(cast(Model, a.model))),
                tools=[wrapped[id(t)] for t in a.tools],
            ),
        )
        return foreign_agent(
            label,
            model_name,
            stead_tools,
            _launch(journal_agent, label),
            limits=self.limits,
            budget=budget,
            prices=self.prices,
            durability=self.durability,
        )

    def _tool(self, what: str, tool: FunctionTool, settings: ToolSettings) -> Tool[..., Any]:
        nested = nested_agent(tool)
        if nested is not None:
            extra = sorted(set(settings) - {"effect"})
            if extra:
                raise UserError(
                    f"{what}, tool {tool.name!r}: an agent used as a tool is recovered as its "
                    f"child run, so it takes only an effect class, not {extra}"
                )
            child = self.built.get(id(nested))
            if child is None:
                # The tree's budget is the parent's: the child is held to it through its link.
                child = self.agent(nested, nested.name, None)
                self.built[id(nested)] = child
            return agent_as_tool(tool, child, f"{what}, tool {tool.name!r}", settings.get("effect"))
        return foreign_tool(
            tool.name,
            tool.params_json_schema,
            description=tool.description,
            effect=settings.get("effect", "non_idempotent"),
            reconcile=settings.get("reconcile"),
            requires_approval=tool.needs_approval is not False,
            timeout=settings.get("timeout", tool.timeout_seconds),
            retries=settings.get("retries", 0),
            what=f"{what}, tool {tool.name!r}",
        )


def _launch(journal_agent: SdkAgent[Any], label: str) -> Launch:
    async def launch(journal: Journal) -> object:
        config = RunConfig(tracing_disabled=True, workflow_name=label)
        # The SDK reads the conversation before the run's input (Runtime.send) from a
        # session over the log; the run loop records the run's own items.
        session = SteadSession(journal.state.session_id or journal.run_id, await journal.history())
        # The run's own limits (stead.Limits: max_turns, budgets) bound it, counted from the
        # log across crashes; the SDK's per-call turn cap would end a long run on its own.
        result = await Runner.run(
            journal_agent,
            journal.state.input,
            run_config=config,
            max_turns=_SDK_TURNS,
            session=session,
        )
        while result.interruptions:
            state = result.to_state()
            for item in result.interruptions:
                await _decide(journal, state, item)
            result = await Runner.run(
                journal_agent, state, run_config=config, max_turns=_SDK_TURNS, session=session
            )
        return result.final_output

    return launch


def _model_name(model: Model) -> str:
    return str(getattr(model, "model", "") or type(model).__name__)


async def _decide(journal: Journal, state: Any, item: ToolApprovalItem) -> None:
    """The run's decision on a call the SDK paused on (``needs_approval``)."""
    call_id = getattr(item.raw_item, "call_id", None)
    if not isinstance(call_id, str):
        raise UserError(f"the Agents SDK paused on {item.raw_item!r}, which has no call id")
    got = await journal.decision(call_id)
    if isinstance(got, ToolResultRecorded):
        state.reject(item, rejection_message=got.content)
    else:
        state.approve(item)


def _settings(agent: str, tool: FunctionTool, mapped: ToolSettings | None) -> ToolSettings:
    marked: ToolSettings | None = getattr(tool, _KEY, None)
    what = f"Agents SDK agent {agent!r}, tool {tool.name!r}"
    if marked is not None and mapped is not None:
        raise UserError(f"{what}: settings given both by @effect and in tools=; give them once")
    settings = marked or mapped or ToolSettings()
    unknown = sorted(set(settings) - set(_OPTIONS))
    if unknown:
        raise UserError(f"{what}: unknown settings {unknown}; it takes {', '.join(_OPTIONS)}")
    return settings


def _journaled_tool(tool: FunctionTool) -> FunctionTool:
    """``tool`` with each invocation handed to the drive's journal (unchanged outside one)."""
    invoke = tool.on_invoke_tool

    async def on_invoke(ctx: SdkToolContext[Any], arguments: str) -> Any:
        journal = current_journal()
        if journal is None:
            return await invoke(ctx, arguments)

        async def body() -> ToolSucceeded | ToolFailed:
            try:
                out = await invoke(ctx, arguments)
            except Exception as exc:  # the SDK's failure_error_function=None lets it out
                return ToolFailed(failure=f"{type(exc).__name__}: {exc}")
            return ToolSucceeded(content=serialize_result(out))

        recorded = await journal.tool(
            ctx.tool_call_id, tool.name, lambda rec: same_json(rec, arguments), body
        )
        return recorded.content

    # An agent tool's copy is a plain function tool to the SDK: it reads the child run's
    # recorded result, with none of the nested-run state the SDK keeps for agent tools.
    return dataclasses.replace(
        tool, on_invoke_tool=on_invoke, _is_agent_tool=False, _agent_instance=None
    )
