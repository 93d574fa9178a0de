"""A throwaway PostgreSQL server from the machine's own binaries, for tests and benchmarks.

    with temporary_postgres() as url:        # postgresql://postgres@127.0.0.1:PORT/postgres
        ...

    with PostgresServer() as server:         # one a test may crash and start again
        server.kill()                        # SIGKILL: the postmaster and all its children
        server.start()                       # crash recovery, same data, same port and URL

``initdb`` makes a cluster in a fresh temporary directory, ``pg_ctl`` starts it on a free
port of 127.0.0.1 (its socket in that directory), and on exit it is stopped and the directory
removed. PostgreSQL refuses to run as root, so as root both run as the ``postgres`` user
(through ``runuser``), who is given the directory. Binaries are found through
``$STEAD_PG_BINDIR``, ``pg_config --bindir``, or the newest ``/usr/lib/postgresql/*/bin``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType


def postgres_bindir() -> Path | None:
    """Where ``initdb`` and ``pg_ctl`` live, or None when PostgreSQL is not installed."""
    candidates: list[str] = []
    if os.environ.get("STEAD_PG_BINDIR"):
        candidates.append(os.environ["STEAD_PG_BINDIR"])
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            )
            candidates.append(out.stdout.strip())
    found = glob.glob("/usr/lib/postgresql/*/bin")
    candidates += sorted(found, key=lambda p: int(Path(p).parent.name), reverse=True)
    for c in candidates:
        if c and (Path(c) / "initdb").exists() and (Path(c) / "pg_ctl").exists():
            return Path(c)
    return None


def ephemeral_ports() -> tuple[int, int]:
    """The kernel's range of ports for a client socket's local end (Linux ``/proc``)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    except (OSError, ValueError):
        return (32768, 60999)  # Linux's default
    return (int(low), int(high))


def _free_port() -> int:
    """A free port of 127.0.0.1 below the ephemeral range. A server killed and started
    again reuses its port (``PostgresServer.start``); one from ``bind(0)`` is in that range,
    where any client socket's local end may take it while the server is down, and the
    restart then failed with "could not bind"."""
    low = ephemeral_ports()[0]
    for _ in range(100):
        port = random.randrange(max(1024, low - 8192), low) if low > 2048 else 0
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use: another one
            return int(s.getsockname()[1])
    raise RuntimeError(f"no free port of 127.0.0.1 below {low}")


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has exited (a zombie has: it holds no memory and no socket)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux ``/proc``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # exited meanwhile
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry.name))
    return found


class PostgresServer:
    """A PostgreSQL cluster of its own, in a temporary directory: start it, crash it with
    SIGKILL, start it again on the same data directory and port (so its URL stays valid).

    A context manager: entering creates the cluster and starts it; leaving stops it and
    deletes the directory. ``durable=False`` turns fsync and synchronous commit off: faster
    for tests that never crash the server, and wrong for those that do (a crash of the
    server then loses commits) and for benchmarks that claim durable writes.
    """

    def __init__(self, *, durable: bool = True, max_connections: int = 200) -> None:
        bindir = postgres_bindir()
        if bindir is None:
            raise RuntimeError(
                "PostgreSQL server binaries not found (install postgresql, or set STEAD_PG_BINDIR)"
            )
        self.bindir = bindir
        self.durable = durable
        self.max_connections = max_connections
        self.home: Path | None = None
        """The temporary directory (the cluster is in ``data`` under it, the log in ``log``)."""
        self.port = 0
        """The port it listens on, fixed at the first start."""
        self._running = False

    @property
    def url(self) -> str:
        """Where to connect (the same across restarts)."""
        if not self.port:
            raise RuntimeError("the server has not been started")
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def data(self) -> Path:
        """The cluster's data directory."""
        if self.home is None:
            raise RuntimeError("the server has not been created")
        return self.home / "data"

    @property
    def running(self) -> bool:
        """Whether it was started and has not been killed or stopped since."""
        return self._running

    @property
    def pid(self) -> int:
        """The postmaster's process id (from its lock file)."""
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def __enter__(self) -> PostgresServer:
        try:
            self.create()
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self, *args: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        done = subprocess.run(
            [*prefix, *args], capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            log = self.home / "log" if self.home is not None else None
            log_text = log.read_text() if log is not None and log.exists() else ""
            raise RuntimeError(
                f"{' '.join(args[:2])} failed ({done.returncode}): {done.stdout}{done.stderr}"
                f"{log_text[-2000:]}"
            )

    def create(self) -> None:
        """``initdb`` a fresh cluster in a new temporary directory. PostgreSQL refuses to
        run as root, so as root the directory is given to the ``postgres`` user."""
        self.home = Path(tempfile.mkdtemp(prefix="stead-pg-"))
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.home, pw.pw_uid, pw.pw_gid)
        self._run(
            str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust",
            "-E", "UTF8", "--no-sync",
        )  # fmt: skip

    def start(self) -> None:
        """Start the server and wait until it accepts connections (after a crash, once its
        crash recovery is done). The first start picks a free port; later ones reuse it."""
        settings = [
            "-c listen_addresses=127.0.0.1",
            f"-k {self.home}",
            f"-c max_connections={self.max_connections}",
        ]
        if not self.durable:
            settings += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        fixed = bool(self.port)
        for attempt in range(1 if fixed else 5):
            port = self.port or _free_port()
            try:
                self._run(
                    str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l",
                    str(self.data.parent / "log"), "-w", "-t", "60",
                    "-o", " ".join([f"-p {port}", *settings]), "start",
                )  # fmt: skip
            except RuntimeError:
                if fixed or attempt == 4:
                    raise
                continue
            self.port = port
            break
        self._running = True

    def kill(self, timeout: float = 10.0) -> None:
        """Crash the server: SIGKILL the postmaster and every process it started, at once.

        Not ``killpg``: each child of the postmaster leads a process group of its own. The
        postmaster is stopped first, so it starts no process between the listing and the
        kill. Returns once every one of them has exited (within ``timeout`` seconds); the
        server's shared memory and lock files are left as a crash leaves them.
        """
        pid = self.pid
        os.kill(pid, signal.SIGSTOP)
        victims = [pid, *_children(pid)]
        for p in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        self._running = False
        deadline = time.monotonic() + timeout
        while not all(_gone(p) for p in victims):
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL processes {victims} outlived SIGKILL")
            time.sleep(0.005)
        if Path(f"/proc/{pid}").exists():
            # A zombie nobody reaps (a container whose init does not): it has exited, but
            # the next postmaster would take its lock files for a live server's.
            (self.data / "postmaster.pid").unlink(missing_ok=True)
            for lock in self.data.parent.glob(".s.PGSQL.*.lock"):
                lock.unlink(missing_ok=True)

    def stop(self) -> None:
        """Stop the server (``immediate``: no checkpoint, the next start recovers)."""
        if self._running:
            self._running = False
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                      "-w", "stop")  # fmt: skip

    def close(self) -> None:
        """Stop the server if it runs, and delete its directory."""
        try:
            with contextlib.suppress(RuntimeError, subprocess.SubprocessError):
                self.stop()
        finally:
            if self.home is not None:
                shutil.rmtree(self.home, ignore_errors=True)


@contextlib.contextmanager
def temporary_postgres(*, durable: bool = True, max_connections: int = 200) -> Iterator[str]:
    """Start a fresh PostgreSQL cluster, yield its URL, stop it and delete it afterwards.

    ``durable=False`` turns fsync off: faster for tests that never crash the server, and
    wrong for benchmarks that claim durable writes.
    """
    with PostgresServer(durable=durable, max_connections=max_connections) as server:
        yield server.url
