"""``stead runs prune|export|import|fork`` and ``stead store copy`` at the command line: what
they print, and a caller's mistake as one line and exit 2 with nothing written."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import stead
from stead.cli import main
from stead.core.retention import DAY
from stead.testing import Reply, ScriptedModel


def make(url: str, n: int, at: float) -> list[str]:
    agent = stead.Agent("support", ScriptedModel([Reply(text="done")]), [])

    async def go() -> list[str]:
        async with stead.Runtime(url, agents=[agent], clock=lambda: at) as rt:
            return [(await rt.run(await rt.start(agent, f"q{i}"))).run_id for i in range(n)]

    return asyncio.run(go())


def test_prune_is_a_dry_run_until_apply(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    old = make(url, 3, 1_000_000.0)  # long ago
    new = make(url, 1, 9e12)  # far ahead of any clock: never old enough
    assert main(["--store", url, "runs", "prune", "--keep", "completed=30d"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "would prune 3 runs" in out and "--apply" in out
    assert all(rid in out for rid in old) and new[0] not in out
    assert main(["--store", url, "runs", "prune", "--keep", "completed=30d", "--apply"]) == 0
    assert "pruned 3 runs" in capsys.readouterr().out
    assert main(["--store", url, "runs", "list", "--json"]) == 0
    listed = capsys.readouterr().out
    assert new[0] in listed and not any(rid in listed for rid in old)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["runs", "prune"], "say what to keep"),
        (["runs", "prune", "--keep", "completed"], "write STATUS=DURATION"),
        (["runs", "prune", "--keep", "completed=soon"], "is not a duration"),
        (["runs", "prune", "--keep", "running=1d"], "not a finished status"),
        (["runs", "prune", "--keep", "completed=1d", "--vacuum"], "pass both"),
        (["runs", "export", "run_nope"], "not found"),
        (["runs", "import", "missing.jsonl"], "no file"),
        (["runs", "fork", "RUN", "--at-turn", "one", "--input", "x"], "turn number"),
    ],
)
def test_a_mistake_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    (rid,) = make(url, 1, 1_000_000.0)
    argv = [a.replace("RUN", rid) for a in argv]
    assert main(["--store", url, *argv]) == 2
    err = capsys.readouterr().err
    assert says in " ".join(err.split()) and err.count("error:") == 1
    assert main(["--store", url, "runs", "list", "--json"]) == 0
    assert rid in capsys.readouterr().out  # nothing was deleted


def test_store_copy_refuses_a_target_that_holds_its_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = f"sqlite:///{tmp_path / 'a.db'}"
    b = f"sqlite:///{tmp_path / 'b.db'}"
    make(a, 2, 1_000_000.0 + DAY)
    assert main(["store", "copy", a, b]) == 0
    assert "copied 2 runs" in capsys.readouterr().out
    assert main(["store", "copy", a, b]) == 2
    assert "already exists" in " ".join(capsys.readouterr().err.split())
