"""``stead.runtime.tune_gc``: the garbage collector set for many runs in flight, only where
asked (a program's own call, or ``stead worker``, whose process is stead's); a ``Runtime``
in someone's program leaves the process's collector as it found it."""

from __future__ import annotations

import asyncio
import gc
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import stead
from _wait import until_async
from stead.runtime import tune_gc
from stead.testing import Reply, ScriptedModel

STEAD = shutil.which("stead", path=str(Path(sys.executable).parent))

PROBE = """\
import gc
import stead
from stead.testing import Reply, ScriptedModel


@stead.tool(effect="read_only")
async def probe() -> dict:
    \"\"\"The collector's settings in the process that runs the tool.\"\"\"
    return {"young": gc.get_threshold()[0], "frozen": gc.get_freeze_count()}


agents = [stead.Agent("probe", ScriptedModel([Reply(tool_calls=[("probe", {})]), "done"]), [probe])]
"""


def test_tune_gc_freezes_the_heap_and_raises_the_young_threshold() -> None:
    """In a process of its own (it changes the whole process): the young threshold is the
    tuned one, what existed is frozen, and a higher threshold the program set is kept."""
    code = textwrap.dedent(
        """
        import gc, json
        from stead.runtime import tune_gc
        before = (gc.get_threshold(), gc.get_freeze_count())
        tune_gc()
        tuned = (gc.get_threshold(), gc.get_freeze_count())
        gc.set_threshold(50_000, 10, 10)
        tune_gc()
        print(json.dumps([before, tuned, gc.get_threshold()]))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    before, tuned, kept = json.loads(out.stdout)
    assert before[0][0] == 700 and before[1] == 0
    assert tuned[0] == [10_000, before[0][1], before[0][2]]
    assert tuned[1] > 1000  # the interpreter, stead and what they imported
    assert kept[0] == 50_000


@pytest.mark.parametrize("young", [0, -5, 2.5, True, "many"])
def test_tune_gc_refuses_a_threshold_that_is_not_a_count(young: object) -> None:
    threshold = gc.get_threshold()
    with pytest.raises(stead.UserError, match="whole number"):
        tune_gc(young)  # type: ignore[arg-type]
    assert gc.get_threshold() == threshold


def test_a_runtime_in_a_program_leaves_its_collector_alone(tmp_path: Path) -> None:
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()

    async def go() -> None:
        agent = stead.Agent("a", ScriptedModel([Reply(tool_calls=[("echo", {})]), "ok"]), [echo])
        rt = stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=[agent])
        try:
            view = await rt.run(await rt.start(agent, "hi"))
            assert view.status is stead.RunStatus.COMPLETED
        finally:
            await rt.close()

    asyncio.run(go())
    assert (gc.get_threshold(), gc.get_freeze_count()) == (threshold, frozen)


@stead.tool(effect="read_only")
async def echo() -> str:
    """Say something."""
    return "said"


def test_stead_worker_tunes_the_collector_of_its_own_process(tmp_path: Path) -> None:
    """A tool run by ``stead worker`` reads the worker's collector: tuned."""
    assert STEAD is not None
    (tmp_path / "gcprobe.py").write_text(PROBE)
    url = f"sqlite:///{tmp_path / 'w.db'}"

    async def result() -> stead.RunView:
        # 90 s of the test's 120, not 600 polls (30 s and the reads' own time): a worker
        # process started on a loaded machine can take most of half a minute to import
        # stead and claim; one that exited fails the test at once.
        rt = stead.Runtime(url)

        async def completed() -> stead.RunView | None:
            view = await rt.get("run_probe")
            assert worker.poll() is None, f"the worker exited {worker.returncode}"
            return view if view.status is stead.RunStatus.COMPLETED else None

        try:
            return await until_async(completed, "the worker to complete the run", timeout=90)
        finally:
            await rt.close()

    rt = stead.Runtime(url, agents=[])
    rt.agents["probe"] = stead.Agent("probe", ScriptedModel(["unused"]))  # to start it by name
    asyncio.run(_start(rt))
    worker = subprocess.Popen(
        [STEAD, "--store", url, "worker", "--agents", "gcprobe:agents", "--poll", "0.05"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        view = asyncio.run(result())
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    seen = json.loads(next(m.content for m in view.messages if m.role == "tool"))
    assert seen["young"] == 10_000 and seen["frozen"] > 1000


async def _start(rt: stead.Runtime) -> None:
    try:
        await rt.start("probe", "look", run_id="run_probe")
    finally:
        await rt.close()
