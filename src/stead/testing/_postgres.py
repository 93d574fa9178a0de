"""A throwaway PostgreSQL server from the machine's own binaries, for tests and benchmarks.

    with temporary_postgres() as url:        # postgresql://postgres@127.0.0.1:PORT/postgres
        ...

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
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path


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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def temporary_postgres(*, durable: bool = True, max_connections: int = 200) -> Iterator[str]:
    """Start a fresh PostgreSQL cluster, yield its URL, stop it and delete it afterwards.

    ``durable=False`` turns fsync off: faster for tests that never crash the server, and
    wrong for benchmarks that claim durable writes.
    """
    bindir = postgres_bindir()
    if bindir is None:
        raise RuntimeError(
            "PostgreSQL server binaries not found (install postgresql, or set STEAD_PG_BINDIR)"
        )
    as_root = os.geteuid() == 0
    prefix = ["runuser", "-u", "postgres", "--"] if as_root else []
    home = Path(tempfile.mkdtemp(prefix="stead-pg-"))
    if as_root:
        pw = pwd.getpwnam("postgres")
        os.chown(home, pw.pw_uid, pw.pw_gid)
    data = home / "data"

    def run(*args: str) -> None:
        done = subprocess.run(
            [*prefix, *args], capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            log_text = (home / "log").read_text() if (home / "log").exists() else ""
            raise RuntimeError(
                f"{' '.join(args[:2])} failed ({done.returncode}): {done.stdout}{done.stderr}"
                f"{log_text[-2000:]}"
            )

    started = False
    try:
        run(
            str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
            "-E", "UTF8", "--no-sync",
        )  # fmt: skip
        settings = [
            "-c listen_addresses=127.0.0.1",
            f"-k {home}",
            f"-c max_connections={max_connections}",
        ]
        if not durable:
            settings += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        for attempt in range(5):
            port = _free_port()
            try:
                run(
                    str(bindir / "pg_ctl"), "-D", str(data), "-l", str(home / "log"), "-w",
                    "-t", "60", "-o", " ".join([f"-p {port}", *settings]), "start",
                )  # fmt: skip
            except RuntimeError:
                if attempt == 4:
                    raise
                continue
            break
        started = True
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        if started:
            with contextlib.suppress(RuntimeError, subprocess.SubprocessError):
                run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(home, ignore_errors=True)
