"""CLI child processes forked from a warm parent, for tests that start many of them.

A ``stead run`` child of a framework's crash test spends 2-3 s of CPU importing the framework
and its provider SDK before ~0.3 s of work, and the suite starts a few hundred of them. A
warm parent (one per xdist worker and set of modules) imports those modules once; each
command is then a fork of it. The child is a process of its own like any other: its own pid,
its stores and sockets opened after the fork, its environment, working directory and
``sys.path`` those of ``python -c`` started there, its output in files, SIGKILLed at its
crash point or by the test; it only skips the imports.

    with_warm = Spawner(("pydantic_ai", "pydantic_ai.models.anthropic"))
    done = with_warm.run(["--store", url, "run", "agent:agent", "hi"], env=env, cwd=home)
    worker = with_warm.popen(["--store", url, "worker", ...], env=env, cwd=home)

The parent never opens a store, starts a thread or an event loop, so nothing of that kind is
shared by a fork. Its children are its own: the test process polls it for their exit
status; when the test process ends (the parent's stdin closes), the parent SIGKILLs any
child still alive, so none outlives the suite.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve()


class Spawned:
    """A forked child, as much of ``subprocess.Popen``'s surface as the tests use; its
    stdout and stderr are files read once it has ended (``communicate``)."""

    def __init__(self, spawner: Spawner, pid: int, out: Path, err: Path) -> None:
        self._spawner = spawner
        self.pid = pid
        self.returncode: int | None = None
        self._out = out
        self._err = err

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._spawner._status(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.005
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(["stead", f"(pid {self.pid})"], timeout or 0)
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        out, err = (p.read_text(errors="replace") for p in (self._out, self._err))
        for p in (self._out, self._err):
            p.unlink(missing_ok=True)
        return out, err


class Spawner:
    """The warm parent of ``warm``'s modules (started on first use), and its children."""

    def __init__(self, warm: Sequence[str]) -> None:
        self.warm = tuple(warm)
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._dir = Path(tempfile.mkdtemp(prefix="stead-spawn-"))
        self._n = 0
        atexit.register(self.close)

    def close(self) -> None:
        """End the warm parent (it SIGKILLs any child still alive) and wait for it."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(self._dir, ignore_errors=True)

    def _ask(self, request: dict[str, Any]) -> Any:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._proc = subprocess.Popen(
                    [sys.executable, str(_HERE), *self.warm],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                )
            assert self._proc.stdin is not None and self._proc.stdout is not None
            self._proc.stdin.write(json.dumps(request).encode() + b"\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the warm parent of {self.warm} died")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"the warm parent of {self.warm}: {reply['error']}")
        return reply["value"]

    def _status(self, pid: int) -> int | None:
        status: int | None = self._ask({"op": "poll", "pid": pid})
        return status

    def popen(
        self, args: Sequence[str], *, env: dict[str, str], cwd: Path, script: Path | None = None
    ) -> Spawned:
        """``stead *args`` started in ``cwd`` with exactly ``env``, as ``python -c`` would;
        with ``script``, ``python script *args`` instead."""
        self._n += 1
        out, err = self._dir / f"{self._n}.out", self._dir / f"{self._n}.err"
        pid = self._ask(
            {
                "op": "spawn",
                "args": list(args),
                "script": None if script is None else str(script),
                "env": env,
                "cwd": str(cwd),
                "out": str(out),
                "err": str(err),
            }
        )
        return Spawned(self, pid, out, err)

    def run(
        self, args: Sequence[str], *, env: dict[str, str], cwd: Path, timeout: float = 90
    ) -> subprocess.CompletedProcess[str]:
        """``subprocess.run(..., capture_output=True, text=True)`` of a forked ``stead``."""
        child = self.popen(args, env=env, cwd=cwd)
        try:
            out, err = child.communicate(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(10)
            raise
        assert child.returncode is not None
        return subprocess.CompletedProcess(["stead", *args], child.returncode, out, err)


# -- the CLI -----------------------------------------------------------------------------------

STEAD = [sys.executable, "-c", "import sys; from stead.cli import main; sys.exit(main())"]
"""The CLI in a fresh interpreter."""

CLI = ("stead.cli._main", "stead.runtime", "stead.store")
"""What every ``stead`` child imports, warmed once in the parent the children fork from."""

FORK = os.environ.get("STEAD_TEST_FRESH_CHILDREN") != "1"
"""Children forked from a warm parent unless ``STEAD_TEST_FRESH_CHILDREN=1`` (``make soak``
sets it for the framework crash points): then each is a fresh interpreter, imports and all."""

_spawners: dict[tuple[str, ...], Spawner] = {}


def spawner(warm: Sequence[str] = ()) -> Spawner:
    """The warm parent of the CLI's and ``warm``'s modules, one per test process."""
    key = (*CLI, *warm)
    if key not in _spawners:
        _spawners[key] = Spawner(key)
    return _spawners[key]


def stead_cli(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 90,
    warm: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """``stead *args`` in a child process run in ``cwd`` (this one's by default) with ``env``
    (this one's by default), to its end; ``warm``: the modules beyond the CLI's it imports."""
    env = dict(os.environ) if env is None else env
    cwd = Path.cwd() if cwd is None else cwd
    if FORK:
        return spawner(warm).run(args, env=env, cwd=cwd, timeout=timeout)
    return subprocess.run(
        [*STEAD, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
        cwd=cwd,
    )


def python_popen(
    script: Path, *args: str, env: dict[str, str], cwd: Path | None = None, warm: Sequence[str] = ()
) -> Spawned | subprocess.Popen[str]:
    """``python script *args`` started in a child process; ``communicate()`` gives its output
    once it has ended."""
    cwd = Path.cwd() if cwd is None else cwd
    if FORK:
        return spawner(warm).popen(args, env=env, cwd=cwd, script=script)
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stead_popen(
    *args: str, env: dict[str, str], cwd: Path, warm: Sequence[str] = ()
) -> Spawned | subprocess.Popen[str]:
    """``stead *args`` started in a child process run in ``cwd``; ``communicate()`` gives
    its output once it has ended."""
    if FORK:
        return spawner(warm).popen(args, env=env, cwd=cwd)
    return subprocess.Popen(
        [*STEAD, *args], env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


# -- the warm parent ---------------------------------------------------------------------------


def _child(request: dict[str, Any]) -> None:
    """In the forked child: become ``python -c 'stead.cli.main()' *args`` run in ``cwd``, or
    ``python script *args``."""
    code = 1
    try:
        os.setpgid(0, 0)
        os.chdir(request["cwd"])
        env: dict[str, str] = request["env"]
        os.environ.clear()
        os.environ.update(env)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, request["out"]), (2, request["err"])):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(f, fd)
            os.close(f)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        script = request.get("script")
        first = "" if script is None else str(Path(script).resolve().parent)
        sys.path[:] = [first, *extra, *sys.path[1:]]
        sys.argv = ["-c" if script is None else script, *request["args"]]
        try:
            if script is None:
                from stead.cli import main

                code = main(request["args"])
            else:
                import runpy

                runpy.run_path(script, run_name="__main__")
                code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        # What the interpreter does on its way out: wait for non-daemon threads, run the
        # atexit hooks, flush the streams; then leave without the warm parent's own exit.
        try:
            threading._shutdown()  # type: ignore[attr-defined]
            import atexit

            atexit._run_exitfuncs()
        except BaseException:
            pass
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _serve(warm: Sequence[str]) -> None:
    import importlib

    for name in warm:
        importlib.import_module(name)
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    children: set[int] = set()
    try:
        for line in requests:
            request = json.loads(line)
            try:
                if request["op"] == "spawn":
                    pid = os.fork()
                    if pid == 0:
                        requests.close()
                        replies.close()
                        _child(request)
                    children.add(pid)
                    value: Any = pid
                else:
                    pid = request["pid"]
                    if pid not in children:
                        raise ValueError(f"pid {pid} is not a child of this parent")
                    done, status = os.waitpid(pid, os.WNOHANG)
                    value = None
                    if done:
                        children.discard(pid)
                        value = os.waitstatus_to_exitcode(status)
                reply: dict[str, Any] = {"value": value}
            except Exception as exc:
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            replies.write(json.dumps(reply).encode() + b"\n")
            replies.flush()
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


if __name__ == "__main__":
    _serve(sys.argv[1:])
