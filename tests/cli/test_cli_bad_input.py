"""What a careless operator types: an empty or short run id, numbers out of range, a secret
on the command line. The real CLI (``main(argv)`` in this process; ``stead serve`` as a real
process where what it prints at start-up matters)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

import stead
from stead.cli import _parser, main
from stead.testing import Reply, ScriptedModel

STEAD = str(Path(sys.executable).with_name("stead"))
ONLY = "run_" + "c0ffee00" + "0" * 24


@stead.tool(effect="non_idempotent", requires_approval=True)
def transfer(cents: int) -> str:
    """Move money, once a person says so."""
    return f"moved {cents}"


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_waiting_run(tmp_path: Path) -> str:
    """A store holding one run, waiting for a person to approve its call ``call_0_0``."""
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    agent = stead.Agent(
        "pay", ScriptedModel([Reply(tool_calls=[("transfer", {"cents": 5})]), "ok"]), [transfer]
    )

    async def go() -> None:
        async with stead.Runtime(store, agents=[agent]) as rt:
            await rt.start(agent, "pay five", run_id=ONLY)
            view = await rt.run(ONLY)
            assert view.status == stead.RunStatus.AWAITING_APPROVAL

    asyncio.run(go())
    return store


async def _status(store: str) -> str:
    async with stead.Runtime(store) as rt:
        return str((await rt.get(ONLY)).status)


@pytest.mark.parametrize("typed", ["", "run_", "c0f", "run_c0f", " ", "    "])
def test_an_empty_or_short_run_id_names_no_run_even_when_one_run_would_match(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], typed: str
) -> None:
    # `stead cancel "$RUN"` with $RUN unset: the one run in the store must stay as it is.
    store = _one_waiting_run(tmp_path)
    for cmd in (
        ("cancel", typed),
        ("approve", typed, "call_0_0"),
        ("deny", typed, "call_0_0", "--reason", "no"),
        ("decide", typed, "call_0_0", "skip"),
        ("runs", "show", typed),
        ("runs", "events", typed),
        ("effects", "list", typed),
    ):
        code, out, err = _cli(capsys, "--store", store, *cmd)
        assert code == 2 and out == "" and "Traceback" not in err, (cmd, out, err)
        if ONLY.startswith(typed) or ONLY.startswith(f"run_{typed}"):
            assert "too short to name a run" in err, (cmd, err)
            assert f"(1 run starts with it: {ONLY})" in err  # the candidate, to copy
        else:  # it starts no run at all
            assert f"run {typed!r} not found" in err, (cmd, err)
    assert asyncio.run(_status(store)) == "awaiting_approval"
    code, out, err = _cli(capsys, "--store", store, "cancel", ONLY[4:8])  # 4 characters
    assert code == 0 and "cancelled" in out, err
    assert asyncio.run(_status(store)) == "cancelled"


def test_the_rule_is_one_function_below_the_faces() -> None:
    from stead.core.id_prefix import choose
    from stead.errors import AmbiguousId

    ids = ["run_aaaa1111", "run_aaaa2222", "r1"]
    assert choose("r1", ids, strip="run_") == "r1"  # an exact id, however short
    assert choose("aaaa1", ids, strip="run_") == "run_aaaa1111"
    assert choose("ffff", ids, strip="run_") is None
    assert choose("zz", ids, strip="run_") is None  # short, but it starts nothing: not found
    for text, why in (("", "too short"), ("aaa", "too short"), ("aaaa", "start of 2 runs")):
        with pytest.raises(AmbiguousId, match=why) as caught:
            choose(text, ids, strip="run_")
        assert set(caught.value.candidates) >= {"run_aaaa1111", "run_aaaa2222"}


# -- numbers ---------------------------------------------------------------------------------


def _numeric_options() -> list[tuple[tuple[str, ...], str]]:
    """Every option of every command whose value is a number: (command path, option)."""
    found: list[tuple[tuple[str, ...], str]] = []

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, (*path, name))
            elif action.option_strings and action.type is not None and action.choices is None:
                found.append((path, action.option_strings[-1]))

    walk(_parser(), ())
    return found


NUMERIC = _numeric_options()


def test_the_numeric_options_are_the_ones_expected() -> None:
    # A new numeric option joins the test below by being found here.
    names = {option for _, option in NUMERIC}
    assert {"--port", "--limit", "--concurrency", "--poll", "--lease-ttl", "--grace"} <= names
    assert {"--max-body", "--heartbeat", "--max-concurrent"} <= names


@pytest.mark.parametrize(("path", "option"), NUMERIC)
@pytest.mark.parametrize("value", ["-1", "99999", "1e999", "nan", "99999999999999999999999", "x"])
def test_every_numeric_option_refuses_what_is_out_of_range_in_one_line(
    capsys: pytest.CaptureFixture[str], path: tuple[str, ...], option: str, value: str
) -> None:
    if value == "99999" and option in ("--limit", "--max-body", "--max-runs"):
        return  # in range for these (up to 100,000 runs, 1 GiB); a day is 86,400 seconds
    code, out, err = _cli(capsys, *path, option, value)
    assert code == 2 and out == "", (path, option, value, err)
    errors = [line for line in err.splitlines() if line.startswith(("stead", "error", "usage"))]
    assert any(f"argument {option}" in line for line in errors), err
    assert "Traceback" not in err


def test_a_port_out_of_range_is_refused_before_anything_listens(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for cmd in (("serve",), ("executor", "serve", "--agents", "m:a")):
        for port in ("99999", "-1", "65536"):
            code, _, err = _cli(capsys, *cmd, "--port", port)
            assert code == 2 and "a port from 0 to 65535" in err, (cmd, port, err)


def test_since_beyond_any_date_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _one_waiting_run(tmp_path)
    for since in ("1" + "0" * 400 + "w", "99999999999999999999d", "0001-01-01", "9999-12-31"):
        code, _, err = _cli(capsys, "--store", store, "runs", "list", "--since", since)
        assert code in (0, 2) and "Traceback" not in err, (since, err)
        if "w" in since or "d" in since:
            assert code == 2 and "more than 1000 years" in err, (since, err)


# -- secrets ---------------------------------------------------------------------------------

SECRET = "a-long-secret-for-alice-0001"


def _serve(tmp_path: Path, *args: str) -> tuple[str, str]:
    """Start ``stead serve`` on a free port, wait for its ready line, stop it; (out, err)."""
    env = {k: v for k, v in os.environ.items() if k != "STEAD_SERVE_TOKENS"}
    proc = subprocess.Popen(
        [STEAD, "--store", f"sqlite:///{tmp_path / 'runs.db'}", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 90
        line = ""
        while time.monotonic() < deadline and "stead serve:" not in line:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
        proc.terminate()
        out, err = proc.communicate(timeout=60)
        return line + out, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_a_token_file_keeps_the_secret_off_the_command_line(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# who may steer runs\nalice:{SECRET}\n\n")
    tokens.chmod(0o600)
    out, err = _serve(tmp_path, "--token-file", str(tokens))
    assert "paste a token" in out, (out, err)  # a token was configured: none was made
    assert "warning" not in err and SECRET not in out + err


def test_a_secret_in_argv_is_warned_about(tmp_path: Path) -> None:
    out, err = _serve(tmp_path, "--token", f"alice:{SECRET}")
    assert "paste a token" in out, (out, err)
    assert "warning: --token puts its secret on this process's command line" in err
    assert "--token-file" in err and SECRET not in err


def test_a_token_file_that_cannot_be_used_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.write_text("# nothing yet\n")
    short = tmp_path / "short"
    short.write_text("alice:short\n")
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe alice")
    for path, words in (
        (tmp_path / "missing", "cannot be read: No such file"),
        (tmp_path, "cannot be read"),
        (empty, "holds no token"),
        (short, "at least 16 characters"),
        (binary, "cannot be read"),
    ):
        code, _, err = _cli(capsys, "serve", "--token-file", str(path))
        assert code == 2 and words in err and "Traceback" not in err, (path, err)


# -- a damaged run ---------------------------------------------------------------------------


def _damage(store: str, run_id: str, seq: int) -> None:
    """Change one stored event by hand, as a disk fault or a careless UPDATE would."""
    import sqlite3

    with sqlite3.connect(store.removeprefix("sqlite:///")) as db:
        db.execute(
            "UPDATE events SET data = '{not json' WHERE run_id = ? AND seq = ?", (run_id, seq)
        )


def test_one_damaged_run_does_not_hide_the_others_from_runs_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _one_waiting_run(tmp_path)
    sound = "run_" + "50d0" + "0" * 28
    hello = stead.Agent("hello", ScriptedModel(["hi"]))

    async def more() -> None:
        async with stead.Runtime(store, agents=[hello]) as rt:
            await rt.run(await rt.start(hello, "say hi", run_id=sound))

    asyncio.run(more())
    _damage(store, ONLY, 2)
    code, out, err = _cli(capsys, "--store", store, "runs", "list")
    assert code == 0, err
    assert "DAMAGED" in out and "c0ffee000000" in out  # the damaged run, marked
    assert "50d000000000" in out and "completed" in out  # and the sound one, as it is
    assert f"corrupt event in run {ONLY!r} at seq 2" in err
    (hint,) = re.findall(r"`(stead [^`]+)`", err)  # runs as printed, and names the row
    code, _, named = _cli(capsys, *shlex.split(hint)[1:])
    assert code == 2 and "at seq 2" in named, (hint, named)
    code, out, err = _cli(capsys, "--store", store, "runs", "list", "--json")
    rows = {r["run_id"]: r for r in map(json.loads, out.splitlines())}
    assert code == 0 and rows[sound]["status"] == "completed" and "damaged" not in rows[sound]
    assert rows[ONLY]["status"] == "awaiting_approval" and "seq 2" in rows[ONLY]["damaged"]
    code, _, err = _cli(capsys, "--store", store, "runs", "show", ONLY)  # one run: its error
    assert code == 2 and "at seq 2" in err
