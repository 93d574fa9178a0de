"""The in-process executor's contract: dispatch is idempotent by key, an abort leaves a
tombstone, and ``run`` (the path the run loop takes) performs the effect in the caller's
task while the key stays visible to dispatch, attach, outcome and cancel."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

import stead
from stead._signal import AbortSignal
from stead.core.effects import (
    REPLAY_POLICY,
    Assignment,
    AssignmentKey,
    ModelBody,
    ModelFailed,
    ToolBody,
    ToolFailed,
)
from stead.core.messages import UserMessage
from stead.errors import DispatchRejected
from stead.providers import ModelRequest
from stead.runtime import InProcessExecutor
from stead.runtime.executors._executor import request_from_json
from stead.testing import ScriptedModel
from stead.tools import ToolRegistry

started: list[int] = []
gate: asyncio.Event | None = None


@stead.tool(effect="read_only")
async def probe(n: int) -> dict[str, Any]:
    """Record that it ran, then wait on the gate when one is set."""
    started.append(n)
    if gate is not None:
        await gate.wait()
    return {"n": n}


def assignment(effect_id: str, n: int = 1) -> Assignment:
    return Assignment(
        key=AssignmentKey(session_id="", run_id="run_x", effect_id=effect_id),
        body=ToolBody(
            tool_name="probe",
            definition_digest=probe.definition_digest,
            arguments=f'{{"n":{n}}}',
            effect_class="read_only",
            replay_policy=REPLAY_POLICY["read_only"],
            tool_call_id="call_1",
            turn_index=0,
            idempotency_key="k",
            attempt=1,
        ),
    )


@pytest.fixture
def executor() -> InProcessExecutor:
    global gate
    started.clear()
    gate = None
    return InProcessExecutor(ScriptedModel([]), ToolRegistry([probe]))


async def test_run_performs_inline_and_the_key_is_accepted_while_it_runs(
    executor: InProcessExecutor,
) -> None:
    global gate
    gate = asyncio.Event()
    a = assignment("e1")
    signal = AbortSignal()
    running = asyncio.ensure_future(executor.run(a, signal=signal))
    await asyncio.sleep(0)
    assert started == [1]
    assert executor.attach(a.key) == "active"
    # A second dispatch of the same key starts nothing; abort cannot tombstone it now.
    assert await executor.dispatch(a, signal=signal) is True
    assert await executor.abort(a.key) is False
    waiter = asyncio.ensure_future(executor.outcome(a.key))
    gate.set()
    outcome = await running
    assert outcome.kind == "tool_succeeded"
    assert await waiter == outcome
    assert started == [1]
    assert executor.attach(a.key) == "missing"  # settled and handed over


async def test_an_aborted_key_never_runs(executor: InProcessExecutor) -> None:
    a = assignment("e2")
    assert await executor.abort(a.key) is True
    assert executor.attach(a.key) == "aborted"
    assert await executor.dispatch(a, signal=AbortSignal()) is False
    outcome = await executor.run(a, signal=AbortSignal())
    assert outcome.kind == "cancelled"
    assert started == []


async def test_cancel_of_an_inline_effect_signals_it_and_the_caller_can_stop_it(
    executor: InProcessExecutor,
) -> None:
    global gate
    gate = asyncio.Event()  # never set: only cancellation ends the tool
    a = assignment("e3")
    signal = AbortSignal()
    running = asyncio.ensure_future(executor.run(a, signal=signal))
    await asyncio.sleep(0)
    await executor.cancel(a.key, "stop")
    assert signal.aborted and signal.reason == "stop"
    assert not running.done()  # cooperative: the handler ignores the signal
    running.cancel()  # what the run loop does after the grace period
    outcome = await running
    assert outcome.kind == "cancelled"
    assert executor.attach(a.key) == "missing"


async def test_dispatch_then_outcome_still_runs_as_a_task(executor: InProcessExecutor) -> None:
    a = assignment("e4", n=4)
    assert await executor.dispatch(a, signal=AbortSignal()) is True
    assert await executor.dispatch(a, signal=AbortSignal()) is True
    outcome = await executor.outcome(a.key)
    assert outcome.kind == "tool_succeeded"
    assert started == [4]


async def test_a_key_accepted_and_settled_is_never_also_aborted(
    executor: InProcessExecutor,
) -> None:
    """Exactly one of an acceptance or an abort ever exists for a key: once its outcome was
    read (and the task forgotten), an abort still loses to the acceptance."""
    a = assignment("settled-then-aborted")
    assert await executor.dispatch(a, signal=AbortSignal())
    await executor.outcome(a.key)
    assert not await executor.abort(a.key)
    assert executor.attach(a.key) != "aborted"


async def test_a_cancelled_outcome_waiter_leaves_the_inline_effect_running(
    executor: InProcessExecutor,
) -> None:
    """Whoever waits for an inline effect's outcome and gives up (its task cancelled) does not
    take the effect down with it: the run that performs it still gets its outcome."""
    global gate
    gate = asyncio.Event()
    a = assignment("e5", n=5)
    running = asyncio.ensure_future(executor.run(a, signal=AbortSignal()))
    await asyncio.sleep(0)
    waiter = asyncio.ensure_future(executor.outcome(a.key))
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    gate.set()
    outcome = await running
    assert outcome.kind == "tool_succeeded"
    assert executor.attach(a.key) == "missing"


class _Recording(InProcessExecutor):
    """The in-process executor, keeping every model body it is handed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bodies: list[ModelBody] = []

    async def run(
        self, assignment: Assignment, *, signal: AbortSignal, local: object | None = None
    ) -> Any:
        if isinstance(assignment.body, ModelBody):
            self.bodies.append(assignment.body)
        return await super().run(assignment, signal=signal, local=local)


class _ReadsJson(_Recording):
    """An executor that reads the request's JSON (as a pool does): it says so."""

    performs_local = False


class _Forwarding:
    """A wrapper that forwards what it lacks to an in-process executor (as the tracing one
    does): ``performs_local`` read on it says the wrapped one's True, but the wrapper's own
    ``run`` may read the JSON."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.inner = _Recording(*args, **kwargs)
        self.bodies = self.inner.bodies

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def run(
        self, assignment: Assignment, *, signal: AbortSignal, local: object | None = None
    ) -> Any:
        return await self.inner.run(assignment, signal=signal, local=local)


@pytest.mark.parametrize("cls", [_Recording, _ReadsJson, _Forwarding])
async def test_the_request_json_is_built_only_for_an_executor_that_reads_it(
    tmp_path: Any, cls: type[_Recording] | type[_Forwarding]
) -> None:
    """An executor that performs the live request (``performs_local``: the in-process one)
    gets a model body without the conversation's JSON and digest, which it would never read;
    any other executor gets them, the same as ``ModelRequest.encode`` makes them."""
    made: list[_Recording | _Forwarding] = []

    def factory(agent: stead.Agent, sink: Any) -> Any:
        made.append(cls(agent.model, agent.registry, sink))
        return made[-1]

    model = ScriptedModel([stead.testing.Reply(tool_calls=[("probe", {"n": 1})]), "done"])
    agent = stead.Agent("recording", model, [probe])
    async with stead.Runtime(
        f"sqlite:///{tmp_path}/runs.db", agents=[agent], executor_factory=factory
    ) as rt:
        rid = await rt.start(agent, "go")
        assert (await rt.run(rid)).status is stead.RunStatus.COMPLETED
    (executor,) = made
    assert len(executor.bodies) == 2
    for body in executor.bodies:
        if cls is _Recording:
            assert (body.request, body.request_digest) == ({}, "")
        else:
            request = request_from_json(body.request)
            assert body.request_digest == request.digest()
            assert body.request == request.to_json()


def _model_assignment(model: str, request: ModelRequest, digest: str) -> Assignment:
    key = AssignmentKey(session_id="", run_id="run_x", effect_id="m1")
    return Assignment(
        key=key, body=ModelBody(model=model, request=request.to_json(), request_digest=digest)
    )


REQUEST = ModelRequest(model="scripted", system="be brief", messages=(UserMessage(content="hi"),))


@pytest.mark.parametrize(
    ("model", "digest", "why"),
    [
        ("another-model", REQUEST.digest(), "names model 'another-model'"),
        ("scripted", "0" * 64, "request digest 000000000000 is not its request's"),
    ],
    ids=["model name", "digest"],
)
async def test_a_model_assignment_that_is_not_its_request_is_refused(
    model: str, digest: str, why: str
) -> None:
    """The body's model name and request digest are what an executor is told it performs:
    a request that says otherwise is refused, at dispatch and when run, and never sent."""
    scripted = ScriptedModel(["never"])
    executor = InProcessExecutor(scripted, ToolRegistry([probe]))
    a = _model_assignment(model, REQUEST, digest)
    with pytest.raises(DispatchRejected, match=why):
        await executor.dispatch(a, signal=AbortSignal())
    outcome = await executor.run(a, signal=AbortSignal())
    assert isinstance(outcome, ModelFailed) and outcome.code == "executor_error"
    assert why in outcome.message
    assert scripted.calls == 0
    fine = _model_assignment("scripted", REQUEST, REQUEST.digest())
    assert (await executor.run(fine, signal=AbortSignal())).kind == "model_succeeded"


async def test_a_tool_assignment_made_for_another_definition_is_refused(
    executor: InProcessExecutor,
) -> None:
    """Arguments the model wrote for another definition of the tool (other parameters,
    another meaning) are not run under this one."""
    a = assignment("e1")
    stale = Assignment(key=a.key, body=dataclasses.replace(a.body, definition_digest="f" * 64))  # type: ignore[arg-type]
    with pytest.raises(DispatchRejected, match="tool 'probe' is defined here with digest"):
        await executor.dispatch(stale, signal=AbortSignal())
    outcome = await executor.run(stale, signal=AbortSignal())
    assert isinstance(outcome, ToolFailed) and "made for ffffffffffff" in outcome.failure
    assert started == []
    assert (await executor.run(a, signal=AbortSignal())).kind == "tool_succeeded"
    assert started == [1]
