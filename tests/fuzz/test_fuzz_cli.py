"""CLI fuzzer: the real ``stead`` command on hypothesis-built argv, over stored runs whose
text looks like markup (``[/]``, ``[bold]``), holds control characters or is huge.

In process (``stead.cli.main(argv)``, the console script's own entry) for speed, on a fresh
copy of a prepared SQLite store per example. The promise: the exit code is 0, 1 or 2 (argparse
exits 2 on a usage error), a 2 comes with a message, nothing escapes as a Python exception or
prints a traceback, and the text a run holds is printed as text (the markup-like words of a
stored prompt appear verbatim in ``runs show`` and ``runs events``). Two subprocess tests cover
what only a real process shows: a traceback on stderr, and a reader that closes the pipe.

A failure that is one of the known findings is recorded, not failed (``_fuzz.KNOWN``).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _fuzz import check, fuzz_settings, run_example, timeout_for, violated
from _wire import texts
from hypothesis import example, given
from hypothesis import strategies as st

import stead
from stead.cli import main
from stead.core.states import RunStatus
from stead.testing import Reply, ScriptedModel

pytestmark = pytest.mark.fuzz

DIR = Path(tempfile.mkdtemp(prefix="stead-fuzz-cli-"))
PREPARED = DIR / "prepared.db"
COUNTER = itertools.count()
MARKUP = "[red]k[/red] [/] [bold]"
"""The start of every stored prompt: rich would read it as markup."""
PROMPTS = [MARKUP + " plain", MARKUP + " \x00\x07\x1b[31m ctl", MARKUP + " " + "h" * 20_000]
RUNS: list[str] = []
CALLS: list[str] = []


@stead.tool(effect="read_only")
def lookup(query: str) -> str:
    """Echo the query (its markup comes back in the tool's output)."""
    return f"[dim]{query}[/dim] [/]"


@stead.tool(effect="non_idempotent", requires_approval=True)
def transfer(amount: int) -> str:
    """Move money, with a person's approval."""
    return f"moved [bold]{amount}[/bold]"


async def _prepare() -> None:
    done = stead.Agent(
        "cli",
        ScriptedModel(
            [
                Reply(text="[red]said[/red] [/]", tool_calls=[("lookup", {"query": "[/] q"})]),
                "[bold]done[/bold] [/] \x1b[2J",
            ]
        ),
        [lookup],
    )
    waiting = stead.Agent(
        "gated", ScriptedModel([Reply(tool_calls=[("transfer", {"amount": 5})]), "ok"]), [transfer]
    )
    async with stead.Runtime(f"sqlite:///{PREPARED}", agents=[done, waiting]) as rt:
        for prompt in PROMPTS:
            rid = await rt.start(done, prompt)
            await rt.run(rid)
            RUNS.append(rid)
        rid = await rt.start(waiting, MARKUP + " waiting")
        view = await rt.run(rid)
        assert view.status is RunStatus.AWAITING_APPROVAL
        RUNS.append(rid)
        CALLS.append(view.approvals[0].tool_call_id)


@pytest.fixture(scope="module", autouse=True)
def prepared() -> Iterator[None]:
    asyncio.run(_prepare())
    before = Path.cwd()
    os.chdir(DIR)  # a bare --store path is a file here, not in the repo
    try:
        yield
    finally:
        os.chdir(before)
        shutil.rmtree(DIR, ignore_errors=True)


# -- argv ------------------------------------------------------------------------------------

words = st.one_of(texts, st.sampled_from(["--json", "--help", "-h", "--", "-", "--x", "[/]"]))
run_ids = st.one_of(st.integers(0, 3).map(lambda i: f"<run{i}>"), st.just("[/]"), texts)
call_ids = st.one_of(st.just("<call>"), texts)
agents_specs = st.sampled_from(
    [
        "fuzz_agents:agent",
        "fuzz_agents:broken",
        "fuzz_agents:not_agent",
        "fuzz_agents:missing",
        "no_such_module_xyz:agent",
        "no-colon",
        ":",
        "",
    ]
)
statuses = st.one_of(st.sampled_from([s.value for s in RunStatus]), texts)
numbers = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats().map(repr),
    st.sampled_from(["0", "-0", "1e999", "nan", "inf", "-inf", "0x10", "²", "١٢", "65536", ""]),
    texts,
)
# The start of a run id as a person (or an unset $RUN) types it: empty, `run_`, a few hex
# digits, or a real id cut anywhere.
starts = st.one_of(
    st.sampled_from(["", "run_", " ", "run"]),
    st.text("0123456789abcdef", max_size=6),
    st.tuples(st.integers(0, 3), st.integers(0, 36)).map(lambda t: f"<run{t[0]}>[:{t[1]}]"),
)
spans = st.one_of(
    st.tuples(st.integers(0, 10**30), st.sampled_from("smhdw")).map(lambda t: f"{t[0]}{t[1]}"),
    st.sampled_from(["1e400w", "0001-01-01", "9999-12-31T23:59", "²h", "nan"]),
    texts,
)


def _cmd(*parts: Any) -> st.SearchStrategy[list[str]]:
    return st.tuples(*(st.just(p) if isinstance(p, str) else p for p in parts)).map(list)


commands = st.one_of(
    _cmd("runs", "list"),
    _cmd("runs", "list", "--status", statuses),
    _cmd("runs", "list", "--limit", st.one_of(st.integers(-5, 5).map(str), texts)),
    _cmd("runs", "show", run_ids),
    _cmd("runs", "events", run_ids),
    _cmd("runs", "events", run_ids, "--json"),
    _cmd("resume", run_ids, "--agents", agents_specs),
    _cmd("approve", run_ids, call_ids),
    _cmd("approve", run_ids, call_ids, "--args", st.one_of(st.just('{"amount": 7}'), texts)),
    _cmd("approve", run_ids, call_ids, "--agents", agents_specs),
    _cmd("deny", run_ids, call_ids, "--reason", texts),
    _cmd("decide", run_ids, call_ids, st.sampled_from(["happened", "not_happened", "skip", "x"])),
    _cmd("cancel", run_ids, "--reason", texts),
    _cmd("run", agents_specs, texts),
    _cmd("cancel", starts),
    _cmd("approve", starts, "<call>"),
    _cmd("runs", "show", starts),
    _cmd("runs", "list", "--limit", numbers, "--since", spans),
    # Each ends before anything is served: a public host without a token, agents that do
    # not load, no queues; so only the number's own check is tried.
    _cmd("serve", "--port", numbers, "--host", "192.0.2.1"),
    _cmd("serve", "--max-body", numbers, "--heartbeat", numbers, "--host", "192.0.2.1"),
    _cmd("worker", "--agents", "fuzz_agents:missing", "--concurrency", numbers),
    _cmd("worker", "--agents", "fuzz_agents:missing", "--poll", numbers, "--grace", numbers),
    _cmd("executor", "--agents", "fuzz_agents:missing", "--port", numbers, "--lease-ttl", numbers),
    st.lists(words, max_size=4).filter(lambda a: not {"worker", "demo"} & set(a)),
)
store_flags = st.one_of(
    st.just("<prepared>"),
    st.just("<prepared>"),
    st.sampled_from(["", "sqlite:///", "sqlite:x", "mysql://h/db", "bare.db"]),
)


def _resolve(argv: list[str], store: str) -> tuple[list[str], str | None]:
    """Fill in the placeholders: a fresh copy of the prepared store, its run and call ids."""
    copy = None
    if store == "<prepared>":
        copy = DIR / f"copy-{next(COUNTER)}.db"
        shutil.copy(PREPARED, copy)
        store = f"sqlite:///{copy}"
    out = ["--store", store]
    for a in argv:
        for i, rid in enumerate(RUNS):
            cut = re.fullmatch(rf"<run{i}>\[:(\d+)\]", a)
            a = rid[: int(cut.group(1))] if cut else a.replace(f"<run{i}>", rid)
        out.append(a.replace("<call>", CALLS[0]))
    return out, (str(copy) if copy else None)


def _invoke(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code: Any
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def _has_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)


def _blame(argv: list[str], exc: BaseException) -> int | None:
    if type(exc).__name__ == "MarkupError" or isinstance(exc, BrokenPipeError):
        return 10
    if any(_has_surrogate(a) for a in argv) and isinstance(exc, UnicodeError):
        return 3
    if "fuzz_agents:broken" in argv or "fuzz_agents:not_agent" in argv:
        return 9  # --agents naming a factory that raises, or neither an Agent nor a list
    return None


def _try(argv: list[str], store: str) -> None:
    full, _copy = _resolve(argv, store)
    try:
        code, out, err = _invoke(full)
    except Exception as exc:
        violated(
            f"stead {full[2:]!r:.200} raised {type(exc).__name__}: {exc}"[:400], _blame(full, exc)
        )
    shown = f"stead {full!r:.200}"
    check(code in (0, 1, 2), f"{shown} exited {code!r}")
    check("Traceback (most recent call last)" not in err, f"{shown} printed a traceback")
    check(code != 2 or (out + err).strip(), f"{shown} exited 2 without a message")
    if store in ("", "sqlite:///") and not out.startswith("usage:"):  # help opens no store
        check(code != 0, f"{shown}: an empty --store was accepted (a temporary database)", 8)
    if full[2:4] == ["runs", "list"] and "--status" in full:
        status = full[full.index("--status") + 1]
        if status not in {s.value for s in RunStatus}:
            check(code != 0, f"{shown}: --status {status!r} is no status, yet exit 0", 11)
    command = full[2] if len(full) > 2 else ""
    where = 4 if full[2:4] == ["runs", "show"] else 3 if command in ("cancel", "approve") else 0
    if where and len(full) > where:
        typed = full[where]
        meant = [r for r in RUNS if r == typed or (len(typed.removeprefix("run_")) >= 4 and (
            r.startswith(typed) or r.startswith(f"run_{typed}")))]  # fmt: skip
        check(
            code != 0 or len(meant) == 1,
            f"{shown}: exit 0 for {typed!r}, which names {len(meant)} runs",
        )
    if command in ("serve", "worker", "executor"):
        check(code == 2, f"{shown}: a server or worker was not refused ({code})")
    if code == 0 and full[2:4] in (["runs", "show"], ["runs", "events"]) and full[4] in RUNS:
        for word in ("[red]k[/red]", "[/]"):
            check(word in out, f"{shown}: the stored {word!r} is not printed verbatim", 10)


@pytest.mark.timeout(timeout_for(180))
@fuzz_settings(60)
@example(argv=["runs", "show", "[/]"], store="<prepared>")
@example(argv=["runs", "show", "<run0>"], store="<prepared>")
@example(argv=["runs", "events", "<run1>"], store="<prepared>")
@example(argv=["runs", "list", "--status", "bogus"], store="<prepared>")
@example(argv=["runs", "list"], store="")
@example(argv=["cancel", ""], store="<prepared>")
@example(argv=["serve", "--port", "99999", "--host", "192.0.2.1"], store="<prepared>")
@example(argv=["resume", "<run0>", "--agents", "fuzz_agents:broken"], store="<prepared>")
@given(argv=commands, store=store_flags)
def test_any_command_line_exits_cleanly_and_prints_run_text_as_text(
    argv: list[str], store: str
) -> None:
    run_example(lambda: _try(argv, store))


# -- what only a real process shows ----------------------------------------------------------


def _stead(*argv: str, pipe_to_head: bool = False) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("stead")
    cmd = [str(exe), "--store", f"sqlite:///{PREPARED}", *argv]
    if not pipe_to_head:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=DIR)
    shell = " ".join(f"'{c}'" for c in cmd) + " | head -c 10 >/dev/null"
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", shell], capture_output=True, text=True, timeout=60
    )


def test_the_real_command_shows_markup_like_run_ids_and_texts_without_a_traceback() -> None:
    def body() -> None:
        for argv in (["runs", "show", "[/]"], ["runs", "show", RUNS[0]]):
            done = _stead(*argv)
            check(done.returncode in (0, 1, 2), f"stead {argv} exited {done.returncode}")
            check("Traceback" not in done.stderr, f"stead {argv}: {done.stderr[-300:]}", 10)
            if argv[-1] == RUNS[0]:
                check("[red]k[/red]" in done.stdout, "runs show drops the stored markup", 10)

    run_example(body)


def test_a_reader_that_closes_the_pipe_gets_no_traceback() -> None:
    def body() -> None:
        done = _stead("runs", "events", RUNS[2], "--json", pipe_to_head=True)
        check(
            "Traceback" not in done.stderr, f"`stead runs events | head`: {done.stderr[-300:]}", 10
        )

    run_example(body)
