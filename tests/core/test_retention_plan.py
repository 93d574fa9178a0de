"""What a retention policy lets go (``stead.core.retention``): a table of single runs, then
properties over random sets of runs with dependents."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stead.core.retention import DAY, Candidate, Retention, expired, plan
from stead.errors import UserError

NOW = 1_000 * DAY
POLICY = Retention(
    keep={"completed": 30 * DAY, "failed": 90 * DAY},
    agents={"audit": Retention(keep={"completed": 365 * DAY})},
)


def run(status: str = "completed", age: float = 40 * DAY, **kw: object) -> Candidate:
    fields: dict[str, object] = {
        "run_id": "r",
        "agent": "support",
        "status": status,
        "finished_at": NOW - age,
        "leased": False,
        "newer": 0,
    }
    fields.update(kw)
    return Candidate(**fields)  # type: ignore[arg-type]


CASES = [
    ("completed past its time", run(), POLICY, True),
    ("completed within its time", run(age=29 * DAY), POLICY, False),
    ("completed exactly at its time", run(age=30 * DAY), POLICY, True),
    ("failed is kept longer", run("failed", age=40 * DAY), POLICY, False),
    ("failed past its own time", run("failed", age=91 * DAY), POLICY, True),
    ("a status the policy names not", run("cancelled", age=999 * DAY), POLICY, False),
    ("queued, however old", run("queued", age=999 * DAY), POLICY, False),
    ("running, however old", run("running", age=999 * DAY), POLICY, False),
    ("waiting on a tool", run("awaiting_tool", age=999 * DAY), POLICY, False),
    ("waiting on a person", run("awaiting_approval", age=999 * DAY), POLICY, False),
    ("held by a worker", run(age=999 * DAY, leased=True), POLICY, False),
    ("its agent's own policy", run(age=40 * DAY, agent="audit"), POLICY, False),
    ("past an agent's cap", run(age=0, newer=3), Retention(max_runs=3), True),
    ("within an agent's cap", run(age=0, newer=2), Retention(max_runs=3), False),
]


@pytest.mark.parametrize(
    ("candidate", "policy", "goes"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_what_one_run_does(candidate: Candidate, policy: Retention, goes: bool) -> None:
    assert (expired(candidate, policy, NOW) is not None) is goes


def test_a_kept_dependent_keeps_its_source_and_the_chain_before_it() -> None:
    chain = [
        run(run_id="a", dependents=("b",)),
        run(run_id="b", dependents=("c",)),
        run(run_id="c", age=1 * DAY),  # kept: too young
        run(run_id="d", dependents=("e",)),
        run(run_id="e"),
        run(run_id="f", dependents=("elsewhere",)),  # not a candidate: it stays
    ]
    assert [v.run_id for v in plan(chain, POLICY, NOW)] == ["d", "e"]


@pytest.mark.parametrize(
    "bad",
    [
        {"keep": {"running": 1.0}},
        {"keep": {"completed": -1.0}},
        {"keep": {"completed": True}},
        {"max_runs": -1},
        {"batch": 0},
        {"interval": 0},
    ],
)
def test_a_policy_that_makes_no_sense_is_refused(bad: dict[str, object]) -> None:
    with pytest.raises(UserError):
        Retention(**bad)  # type: ignore[arg-type]


STATUSES = [
    "queued",
    "running",
    "awaiting_tool",
    "awaiting_approval",
    "completed",
    "failed",
    "cancelled",
    "timed_out",
]


@st.composite
def worlds(draw: st.DrawFn) -> list[Candidate]:
    n = draw(st.integers(0, 12))
    ids = [f"r{i}" for i in range(n)]
    out = []
    for i, rid in enumerate(ids):
        later = [*ids[i + 1 :], "outside"]
        out.append(
            Candidate(
                run_id=rid,
                agent=draw(st.sampled_from(["a", "b"])),
                status=draw(st.sampled_from(STATUSES)),
                finished_at=NOW - draw(st.floats(0, 200 * DAY)),
                leased=draw(st.booleans()),
                newer=draw(st.integers(0, 5)),
                dependents=tuple(draw(st.lists(st.sampled_from(later), max_size=2, unique=True))),
            )
        )
    return out


@given(worlds(), st.sampled_from([POLICY, Retention(max_runs=2), Retention(keep={"failed": 0})]))
def test_what_goes_is_finished_unheld_expired_and_nothing_kept_depends_on_it(
    world: list[Candidate], policy: Retention
) -> None:
    going = {v.run_id for v in plan(world, policy, NOW)}
    by_id = {c.run_id: c for c in world}
    for rid in going:
        c = by_id[rid]
        assert c.status in {"completed", "failed", "cancelled", "timed_out"} and not c.leased
        assert expired(c, policy, NOW) is not None
        assert all(d in going for d in c.dependents)  # no kept run is made from it
    # Nothing that could go is kept without a reason: its dependents do not all go.
    for c in world:
        if c.run_id not in going and expired(c, policy, NOW) is not None:
            assert any(d not in going for d in c.dependents)
    assert {v.run_id for v in plan([by_id[r] for r in going], policy, NOW)} == going
