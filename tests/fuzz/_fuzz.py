"""What the three fuzzers share: the example budget, the known-findings filter, the checks.

Budget: ``make test`` runs a small fixed number of examples per fuzzer, derandomized (the same
examples on every machine, no example database), so CI is reproducible and quick. ``make fuzz``
sets ``STEAD_FUZZ_EXAMPLES`` (e.g. 2000) and gets fresh random examples every time.

Known findings: ``KNOWN`` holds the numbers of findings the fuzzers report (each check names
its finding) that are known and not fixed yet. An example whose failure is one of them is
counted (and listed at the end of the pytest run) instead of failing the test. It is empty:
every finding fails. ``STEAD_FUZZ_KNOWN=1,3`` overrides the set for
one pytest run (``STEAD_FUZZ_KNOWN=`` makes every finding fail, so hypothesis shrinks it to a
minimal example).
"""

from __future__ import annotations

import contextlib
import os
from collections import defaultdict
from collections.abc import Callable
from typing import Any, NoReturn

from hypothesis import HealthCheck, settings

KNOWN: frozenset[int] = frozenset()
"""Findings known and not fixed yet: an example that hits one is recorded, not failed."""

if "STEAD_FUZZ_KNOWN" in os.environ:
    KNOWN = frozenset(int(n) for n in os.environ["STEAD_FUZZ_KNOWN"].split(",") if n.strip())

EXAMPLES = int(os.environ.get("STEAD_FUZZ_EXAMPLES") or 0)
"""0: the quick, fixed budget of ``make test``; N: N random examples per fuzzer."""


def fuzz_settings(quick: int) -> settings:
    """``quick`` derandomized examples (make test), or ``STEAD_FUZZ_EXAMPLES`` (make fuzz)."""
    checks = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
    if EXAMPLES:
        return settings(
            max_examples=EXAMPLES, deadline=None, suppress_health_check=checks, print_blob=True
        )
    return settings(
        max_examples=quick,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=checks,
    )


def timeout_for(quick_seconds: float) -> float:
    """pytest-timeout for a fuzz test: its usual ceiling, or enough for a long ``make fuzz``."""
    return quick_seconds if not EXAMPLES else max(quick_seconds, EXAMPLES * 3.0)


HITS: dict[int, list[str]] = defaultdict(list)
"""finding -> the first lines of the examples that hit it in this pytest run (for the summary)."""

_FOUND: list[tuple[str, int | None]] = []
"""What the current example violated: (message, finding or None for a new one)."""


class _Stop(Exception):
    """The current example cannot go on (its run could not be read, say)."""


def check(ok: Any, message: str, finding: int | None = None) -> None:
    """Note a violation unless ``ok``; the example goes on, so one finding masks no other."""
    if not ok:
        _FOUND.append((message, finding))


def violated(message: str, finding: int | None = None) -> NoReturn:
    """Note a violation and stop the example here."""
    _FOUND.append((message, finding))
    raise _Stop(message)


def run_example(body: Callable[[], object]) -> None:
    """Run one example; fail it if it violated anything but the findings in ``KNOWN``."""
    _FOUND.clear()
    with contextlib.suppress(_Stop):
        body()
    found, _FOUND[:] = list(_FOUND), []
    new = [(m, f) for m, f in found if f is None or f not in KNOWN]
    if new:
        lines = [(f"[finding {f}] " if f is not None else "[new finding] ") + m for m, f in new]
        raise AssertionError("\n".join(lines))
    for message, finding in found:
        assert finding is not None
        HITS[finding].append(message.splitlines()[0][:200] if len(HITS[finding]) < 3 else "")


def loop_errors() -> list[dict[str, Any]]:
    """Install a recorder for what the running event loop reports as unhandled (a task
    exception never retrieved, a callback that raised); returns the list it fills."""
    import asyncio

    errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: errors.append(ctx))
    return errors


def check_loop(errors: list[dict[str, Any]], *, collect: bool = True) -> None:
    """No task failed without anyone looking (it would be logged as a traceback).
    ``collect``: first collect garbage, so a task dropped in a reference cycle reports too
    (a full collection costs most of a second in a big test process)."""
    if collect:
        import gc

        gc.collect()
    for ctx in errors:
        exc = ctx.get("exception")
        check(False, f"event loop: {ctx.get('message')}: {type(exc).__name__}: {exc}"[:300])
