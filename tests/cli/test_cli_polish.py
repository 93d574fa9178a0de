"""The CLI polished: watch, short ids and prefixes, list columns and filters,
JSON, what happens next after a decision, ``--store`` anywhere, no store created by a reader,
80 columns. The real CLI: ``main(argv)`` in this process, processes where a worker must run."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import stead
from stead.cli import main
from stead.providers import ModelCall, ModelResponse
from stead.testing import Reply, ScriptedModel

STEAD = [sys.executable, "-c", "import sys; from stead.cli import main; sys.exit(main())"]
A = "run_" + "aaaa1111" + "0" * 24
B = "run_" + "aaaa2222" + "0" * 24
C = "run_" + "bbbb3333" + "0" * 24


@stead.tool(effect="non_idempotent", requires_approval=lambda a: a["cents"] > 100)
def refund(order_id: int, cents: int) -> str:
    """Refund an order."""
    return f"refunded {cents}"


@stead.tool(effect="read_only")
def dump(n: int) -> str:
    """A long output."""
    return "[bold]output[/bold] " * n


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(autouse=True)
def _eighty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")


def _store(tmp_path: Path) -> str:
    store = f"sqlite:///{tmp_path / 'runs.db'}"

    async def go() -> None:
        hello = stead.Agent("hello", ScriptedModel([Reply(text="hello there")]))
        other = stead.Agent("other", ScriptedModel([Reply(text="hi")]))
        async with stead.Runtime(store, agents=[hello, other]) as rt:
            await rt.run(await rt.start(hello, "say hello", run_id=A))
            await rt.run(await rt.start(hello, "again", run_id=B))
            await rt.start(other, "queued one", run_id=C)

    asyncio.run(go())
    return store


def test_runs_list_short_ids_columns_agent_since_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path)
    code, out, _ = _cli(capsys, "--store", store, "runs", "list")
    assert code == 0
    header = out.splitlines()[0].split()
    assert header == ["run", "agent", "status", "age", "took", "turns", "tokens", "cost"]
    assert "aaaa11110000 " in out and A not in out  # 12 hex digits, copyable
    code, out, _ = _cli(capsys, "--store", store, "runs", "list", "--agent", "other", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["run_id"] for r in rows] == [C]
    assert rows[0]["short_id"] == "bbbb33330000" and rows[0]["status"] == "queued"
    code, out, _ = _cli(capsys, "--store", store, "runs", "list", "--agent", "hello", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert {r["run_id"] for r in rows} == {A, B}
    assert all(r["turns"] == 1 and r["usage"]["output_tokens"] > 0 for r in rows)
    for since, expected in (("2h", 3), ("1w", 3), ("2999-01-01", 0), ("2000-01-01", 3)):
        code, out, _ = _cli(capsys, "--store", store, "runs", "list", "--since", since, "--json")
        assert code == 0 and len(out.splitlines()) == expected, since
    code, _, err = _cli(capsys, "--store", store, "runs", "list", "--since", "yesterday")
    assert code == 2 and "--since 'yesterday'" in err and "2h" in err
    code, out, _ = _cli(capsys, "--store", store, "runs", "show", "aaaa1", "--json")
    shown = json.loads(out)
    assert code == 0 and shown["run_id"] == A and shown["output"] == "hello there"
    assert shown["input"] == "say hello" and shown["approvals"] == []


def test_a_unique_prefix_names_a_run_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path)
    for args in (
        ("runs", "show", "aaaa1"),
        ("runs", "events", "run_aaaa1"),
        ("runs", "watch", "aaaa11110000"),
    ):
        code, out, err = _cli(capsys, "--store", store, *args)
        assert code == 0 and "hello there" in out, (args, err)
    ambiguous: list[tuple[str, ...]] = [
        ("runs", "show", "aaaa"),
        ("runs", "watch", "run_aaaa"),
        ("cancel", "aaaa"),
        ("approve", "aaaa", "call_0_0"),
        ("deny", "aaaa", "call_0_0", "--reason", "no"),
        ("resume", "aaaa", "--agents", "stead.demo._agent:agents"),
    ]
    for cmd in ambiguous:
        code, out, err = _cli(capsys, "--store", store, *cmd)
        assert code == 2 and out == "", cmd
        assert "is the start of 2 runs" in err and A in err and B in err, (cmd, err)
    code, _, err = _cli(capsys, "--store", store, "runs", "show", "ffff")
    assert code == 2 and "run 'ffff' not found" in err
    code, out, _ = _cli(capsys, "--store", store, "cancel", "bbbb")
    assert code == 0 and "cancelled" in out


def test_approve_deny_cancel_say_what_happens_next(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    (tmp_path / "polish_refunds.py").write_text(
        "import stead\nfrom stead.testing import Reply, ScriptedModel\n"
        "from tests.cli.test_cli_polish import refund\n"
        "agents = [stead.Agent('refunds', ScriptedModel([Reply(tool_calls=[('refund', "
        "{'order_id': 1, 'cents': 500})]), 'Done.']), [refund])]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    polish_refunds = importlib.import_module("polish_refunds")

    async def waiting(n: int) -> list[str]:
        async with stead.Runtime(store, agents=polish_refunds.agents) as rt:
            ids = [await rt.start("refunds", f"refund {i}") for i in range(n)]
            for rid in ids:
                await rt.run(rid)
            return ids

    first, second, third = asyncio.run(waiting(3))
    code, out, err = _cli(capsys, "--store", store, "approve", first[4:16], "call_0_0")
    assert code == 0, err
    assert "awaiting_tool" in out and "next: a worker with agent 'refunds' will pick it up" in out
    assert "stead resume continues it here, given --agents" in out
    code, out, _ = _cli(
        capsys, "--store", store, "deny", second, "call_0_0", "--reason", "too much",
        "--agents", "polish_refunds:agents",
    )  # fmt: skip
    assert (
        code == 0
        and "next: continuing now" in out
        and out.rstrip().endswith("tokens]")
        and "completed" in out.splitlines()[-1]
    )
    code, out, _ = _cli(capsys, "--store", store, "cancel", third)
    assert code == 0 and out.startswith("cancelled")
    assert "next: nothing drives it; stead resume continues it here, given --agents" in out


def test_store_is_taken_after_the_command_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    monkeypatch.chdir(tmp_path)  # the default store, stead.db, would be made here
    for args in (
        ("runs", "list", "--store", store),
        ("runs", "show", "aaaa1", "--store", store),
        ("runs", "events", "--store", store, "aaaa1"),
        ("--store", store, "runs", "list"),
    ):
        code, out, err = _cli(capsys, *args)
        assert code == 0 and "aaaa1111" in out, (args, err)
    code, _, err = _cli(capsys, "runs", "list")
    assert code == 2 and "stead.db" in err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("stead")) == []


def test_read_only_commands_never_create_a_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "typo.db"
    for args in (
        ("runs", "list"),
        ("runs", "show", "abc"),
        ("runs", "events", "abc", "--json"),
        ("runs", "watch", "abc"),
        ("cancel", "abc"),
    ):
        code, out, err = _cli(capsys, "--store", f"sqlite:///{path}", *args)
        assert code == 2 and out == "", args
        assert f"no SQLite store at '{path}'" in err and "--store" in err, (args, err)
        assert list(tmp_path.iterdir()) == [], args


def test_list_and_show_fit_80_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    agent = stead.Agent(
        "an-agent-with-a-name-much-longer-than-any-column-should-hold-" * 2,
        ScriptedModel([Reply(tool_calls=[("dump", {"n": 40})]), "done " * 60]),
        [dump],
    )

    async def go() -> str:
        async with stead.Runtime(store, agents=[agent]) as rt:
            rid = await rt.start(agent, "a long [prompt] " * 40, run_id="run_" + "c" * 60)
            await rt.run(rid)
            return rid

    rid = asyncio.run(go())
    shown = {}
    for args in (("runs", "list"), ("runs", "show", rid), ("runs", "watch", rid)):
        code, out, _ = _cli(capsys, "--store", store, *args)
        assert code == 0 and out, args
        assert max(len(line) for line in out.splitlines()) <= 80, (args, out)
        shown[args[1]] = out
    first_column = "".join(line[:12] for line in shown["list"].splitlines()[2:])
    assert rid in first_column.replace(" ", "")  # a long chosen id is folded, never cut
    code, out, _ = _cli(capsys, "--store", store, "runs", "show", rid)
    assert "[bold]output[/bold]" in out  # text, not markup


WORKER = """
import asyncio, sys, stead
from stead.testing import Reply, ScriptedModel
from tests.cli.test_cli_polish import refund
agent = stead.Agent("watched", ScriptedModel(
    [Reply(tool_calls=[("refund", {"order_id": 1, "cents": 5})]), "all done"]), [refund])
async def go():
    async with stead.Runtime(sys.argv[1], agents=[agent]) as rt:
        if sys.argv[2] == "start":
            print(await rt.start(agent, "refund a little"))
        else:
            print((await rt.run(sys.argv[3])).status.value)
asyncio.run(go())
"""


def _worker(store: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", WORKER, store, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=Path(__file__).parents[2],
    )
    return done.stdout.strip()


# A shell gives the command in the terminal's foreground Ctrl-C's default action, whatever its
# own: a test run started in the background (``make test &``) ignores SIGINT, and Python keeps an
# inherited ignore (so asyncio.run leaves SIGINT alone). The watcher starts as that foreground
# command would.
FOREGROUND = [
    sys.executable,
    "-c",
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from stead.cli import main; sys.exit(main())",
]


def _watcher(store: str, rid: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*FOREGROUND, "--store", store, "runs", "watch", rid],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "100", "PYTHONFAULTHANDLER": "1"},
    )


def test_watch_follows_a_run_another_process_drives(tmp_path: Path) -> None:
    """The watch is up (it printed the run's creation) before a worker process starts the
    run; it shows every event that worker appends, then the final state, and exits 0."""
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    rid = _worker(store, "start")
    watcher = _watcher(store, rid[4:12])
    try:
        assert watcher.stdout is not None
        assert "created" in watcher.stdout.readline()
        assert _worker(store, "run", rid) == "completed"
        out, err = watcher.communicate(timeout=60)
    finally:
        watcher.kill()
        watcher.communicate()
    assert watcher.returncode == 0, err
    for word in ("started", "turn 1", "intent", "refund", "result", "turn 2", "all done"):
        assert word in out, word
    assert out.rstrip().splitlines()[-1].startswith("completed")


def test_watch_ends_when_the_run_waits_on_a_person(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"

    async def go() -> str:
        agent = stead.Agent(
            "gated", ScriptedModel([Reply(tool_calls=[("refund", {"order_id": 1, "cents": 500})])]),
            [refund],
        )  # fmt: skip
        async with stead.Runtime(store, agents=[agent]) as rt:
            rid = await rt.start(agent, "refund a lot")
            await rt.run(rid)
            return rid

    rid = asyncio.run(go())
    code, out, _ = _cli(capsys, "--store", store, "runs", "watch", rid)
    assert code == 0 and "approval?" in out
    assert "awaiting_approval" in out and "call call_0_0 (refund) waits for approval" in out


def test_ctrl_c_ends_a_watch_quietly(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    rid = _worker(store, "start")  # queued: nobody drives it, so the watch waits
    watcher = _watcher(store, rid)
    try:
        assert watcher.stdout is not None
        assert "created" in watcher.stdout.readline()
        watcher.send_signal(signal.SIGINT)
        try:
            _, err = watcher.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            # Where it hangs, said by faulthandler (PYTHONFAULTHANDLER) on SIGABRT.
            watcher.send_signal(signal.SIGABRT)
            _, err = watcher.communicate(timeout=30)
            raise AssertionError(f"the watch outlived Ctrl-C by 30 s:\n{err}") from None
    finally:
        watcher.kill()
        watcher.communicate()  # its pipes closed here, not left to a later test's GC
    assert watcher.returncode == 130 and err == ""


def test_watch_in_this_process_streams_the_text(tmp_path: Path) -> None:
    """Text streams as it arrives when the watcher's process drives the run: the model
    holds its reply until the watcher has printed the streamed words."""
    from io import StringIO

    from rich.console import Console

    from stead.cli._watch import watch

    seen = asyncio.Event()

    class Screen(StringIO):
        def write(self, s: str) -> int:
            n = super().write(s)
            if "streamed words" in self.getvalue():
                seen.set()
            return n

    class Slow(ScriptedModel):
        async def complete(self, call: ModelCall) -> ModelResponse:
            assert call.on_progress is not None
            call.on_progress("streamed words")
            await asyncio.wait_for(seen.wait(), 30)
            return await super().complete(call)

    agent = stead.Agent("streamer", Slow([Reply(text="final answer")]))
    screen = Screen()

    async def go() -> int:
        async with stead.Runtime(f"sqlite:///{tmp_path / 'runs.db'}", agents=[agent]) as rt:
            rid = await rt.start(agent, "talk")
            driving = asyncio.create_task(rt.run(rid))
            code = await watch(rt, rid, Console(file=screen, width=80))
            await driving
            return code

    assert asyncio.run(go()) == 0
    text = screen.getvalue()
    assert text.index("streamed words") < text.index("final answer")


SLOW_WORKER = """
import asyncio, sys, stead
from stead.testing import Reply, ScriptedModel
agent = stead.Agent("slow", ScriptedModel([Reply(text="late", delay=60)]))
async def go():
    async with stead.Runtime(sys.argv[1], agents=[agent]) as rt:
        print((await rt.run(sys.argv[2])).status.value)
asyncio.run(go())
"""


def test_cancel_of_a_run_a_worker_drives_says_the_worker_stops_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"

    async def start() -> str:
        agent = stead.Agent("slow", ScriptedModel([Reply(text="late", delay=60)]))
        async with stead.Runtime(store, agents=[agent]) as rt:
            return await rt.start(agent, "take your time")

    rid = asyncio.run(start())
    worker = subprocess.Popen(
        [sys.executable, "-c", SLOW_WORKER, store, rid],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        async def turn_started() -> None:
            async with stead.Runtime(store) as rt:
                while not any(e.event.kind == "turn_started" for e in await rt.events(rid)):
                    await rt.store.wait_changed(rid, (await rt.store.get_run(rid)).last_seq, 5)

        asyncio.run(asyncio.wait_for(turn_started(), 60))
        code, out, _ = _cli(capsys, "--store", store, "cancel", rid[4:16])
        out = " ".join(out.split())
        assert code == 0 and out.startswith("running"), out
        assert "next: its worker" in out and "stops it at its next step" in out
        done, _ = worker.communicate(timeout=60)
    finally:
        worker.kill()
    assert done.strip() == "cancelled"
