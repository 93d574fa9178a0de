"""schemathesis against the OpenAPI document of a real ``stead serve``: every operation, with
inputs that fit the schema and inputs that do not, and never a 5xx.

The example budget is small in ``make test`` (``STEAD_SCHEMATHESIS_EXAMPLES``, default 3 per
operation and mode); raise it to search harder.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from _stack import SECRET, Stack

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.generation import GenerationMode  # noqa: E402

EXAMPLES = int(os.environ.get("STEAD_SCHEMATHESIS_EXAMPLES", "3"))
AUTH = {"Authorization": f"Bearer {SECRET}"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    folder = tmp_path_factory.mktemp("fuzz")
    s = Stack(f"sqlite:///{folder / 'runs.db'}", folder)
    s.serve("--worker", "--poll", "0.2")
    assert s.client is not None
    # Something to find: a run that completed and one waiting on a person.
    for agent in ("lookup", "refunds"):
        s.client.post("/runs", json={"agent": agent, "input": "go", "run_id": f"run_{agent}"})
    try:
        yield s
    finally:
        s.close()


# 300 s, not the default 120: the search is hypothesis and schemathesis drawing cases in
# this process (CPU, not waiting), which beside the suite's other workers outlasts 120 s.
@pytest.mark.timeout(300)
def test_no_operation_answers_with_a_server_error(stack: Stack) -> None:
    # Driven by hand, not by schemathesis' pytest plugin (which reaches into pytest
    # internals that pytest 9 removed): one hypothesis search per operation and mode.
    api = schemathesis.openapi.from_url(f"{stack.url}/openapi.json")
    operations = [result.ok() for result in api.get_all_operations()]
    assert len(operations) >= 14
    searched: list[tuple[str, GenerationMode]] = []
    session = requests.Session()  # one keep-alive connection for every case
    # Random ids find no run; a third pass aims the bodies at runs that exist (one done, one
    # waiting on a person), so approve, deny, answer, cancel and resume really run.
    real = {"run_id": "run_refunds", "call_id": "call_0_0"}
    passes = [(GenerationMode.POSITIVE, None), (GenerationMode.NEGATIVE, None)]
    passes.append((GenerationMode.POSITIVE, real))
    for operation in operations:
        names = {p.name for p in operation.path_parameters}
        for mode, fixed in passes:
            if fixed is not None and not names:
                continue
            strategy = operation.as_strategy(
                generation_mode=mode,
                path_parameters={k: v for k, v in (fixed or {}).items() if k in names} or None,
            )

            @given(case=strategy)
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                suppress_health_check=list(HealthCheck),
                database=None,
                derandomize=True,
            )
            def search(case: Any) -> None:
                case.call_and_validate(session=session, headers=AUTH, checks=[not_a_server_error])

            try:
                search()
            except Unsatisfiable:
                # Nothing to get wrong (no parameters, no body): no negative cases exist.
                assert mode is GenerationMode.NEGATIVE, operation.label
                continue
            searched.append((operation.label, mode))
    session.close()
    assert len(searched) >= 2 * len(operations) - 4, searched
