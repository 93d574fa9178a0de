"""``stead worker`` child processes for the scale-out tests, and ways to watch the store."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from stead.store import Store

HERE = Path(__file__).parent
STEAD = shutil.which("stead", path=str(Path(sys.executable).parent))


class WorkerProc:
    """One ``stead worker`` process serving ``_fleet:agents`` (or ``stead executor``, with
    ``command="executor"``); its log goes to a file."""

    def __init__(
        self,
        url: str,
        log: Path,
        *options: str,
        env: dict[str, str] | None = None,
        command: str = "worker",
        netns: str | None = None,
    ) -> None:
        """``netns``: run it in that network namespace (``ip netns exec``, which execs: the
        process is still ``stead``, its pid ours to signal)."""
        assert STEAD is not None, "the stead script is installed with the package"
        self.log = log
        self._out = log.open("w")
        inside = ["ip", "netns", "exec", netns] if netns is not None else []
        self.proc = subprocess.Popen(
            [*inside, STEAD, "--store", url, command, "--agents", "_fleet:agents", *options],
            cwd=HERE,
            env={**os.environ, **(env or {})},
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def text(self) -> str:
        return self.log.read_text()

    def ready(self) -> bool:
        """Whether it said it is ready (a worker or an executor logs `` ready: ``)."""
        return " ready: " in self.text()

    def signal(self, sig: signal.Signals) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def wait(self, timeout: float = 60) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self._out.close()

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM and wait (SIGCONT first, in case it is frozen)."""
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.wait()


async def statuses(store: Store) -> Counter[str]:
    return Counter(r.status for r in await store.list_runs(limit=100_000))
