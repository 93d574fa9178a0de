"""Suite-wide fixtures and the two tiers.

**Tiers.** Every test is in the fast tier (in this process only: core, tools, codec, stores on
SQLite, providers against the wire servers in a thread) or the system tier (child processes,
PostgreSQL, HTTP servers, the browser, SIGKILL, soaks, mypy), marked ``system``, so that
``-m system`` / ``-m "not system"`` run one of them (``make test-system``, ``make
test-fast``). ``pytest_collection_modifyitems`` decides, in this order: a ``system`` or
``fast`` mark set by hand; a fixture that brings up a system part (``SYSTEM_FIXTURES``); a
parameter ``postgres`` (the backends fixtures); the test module's source, or a helper module
of tests/ it imports, naming a way to start a process or a server (``_STARTS``). A test
nobody marked lands where what it uses puts it.

**PostgreSQL.** One server for the whole run. Under xdist the controller starts it (in a
thread, while the workers collect) and stops it when the run ends, also on a failure or
Ctrl-C (``pytest_unconfigure``); each worker makes a database of its own on it (``stead_gw0``,
...), not a server. A run without workers (``-n 0``) starts its server the first time a test
asks for ``pg_url``. ``STEAD_TEST_POSTGRES_URL`` points the suite at an existing server
instead. Each test gets a schema of its own (through the URL's ``search_path``), so tests
never see each other's runs.

Tests that crash the database get a server of their worker's own, ``crashable_postgres``,
always started from the local binaries (an existing server is not ours to kill), durable,
and never the one every other test shares.

Without PostgreSQL the tests that need it are skipped, except when ``CI`` is set: then they
fail, so a CI run can never pass without having run them.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from stead.testing import PostgresServer

PG_ENV = "STEAD_TEST_POSTGRES_URL"
TESTS = Path(__file__).parent

# No wall-clock limits on hypothesis's examples: on a loaded machine (parallel workers, CI)
# a slow example or slow generation is not a bug. A test's own @settings still wins.
settings.register_profile("stead", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("stead")


# -- tiers ----------------------------------------------------------------------------------

SYSTEM_FIXTURES = frozenset(
    {
        "postgres_server",
        "pg_url",
        "module_pg_url",
        "crashable_server",
        "crashable_postgres",
        "crashable_pg_url",
        "http_server",  # tests/mcp_tools: an MCP server in a child process
    }
)
"""Fixtures that bring up PostgreSQL, a child process or a server."""

_STARTS = re.compile(
    r"\bsubprocess\b|\bPopen\b|create_subprocess_|\bsys\.executable\b|\bmultiprocessing\b"
    r"|\bos\.fork\b|\bos\.kill\b|\bSIGKILL\b|\bplaywright\b|^import uvicorn|\bmypy import api\b",
    re.MULTILINE,
)
"""What a module that starts a process, a server or mypy says in its source."""

_IMPORTS = re.compile(r"^(?:from|import) (\w+)", re.MULTILINE)


@functools.cache
def _starts_processes(path: Path) -> bool:
    """Whether ``path``, or a helper module of tests/ it imports (by its bare name, as tests
    import their helpers), starts a process or a server. A module name that is also a
    package's (``json``) matches no file of tests/, so only helpers are read."""
    try:
        text = path.read_text()
    except OSError:
        return False
    if _STARTS.search(text):
        return True
    for name in set(_IMPORTS.findall(text)):
        # Beside it, or in any directory of tests/ (some put another's on their sys.path).
        for helper in (path.parent / f"{name}.py", *TESTS.glob(f"**/{name}.py")):
            if helper != path and helper.is_file() and _starts_processes(helper):
                return True
    return False


def _is_system(item: pytest.Item) -> bool:
    if item.get_closest_marker("system") is not None:
        return True
    if item.get_closest_marker("fast") is not None:
        return False
    if SYSTEM_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "postgres" in callspec.params.values():
        return True
    return _starts_processes(Path(str(item.path)))


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _is_system(item) and item.get_closest_marker("system") is None:
            item.add_marker(pytest.mark.system)


# -- reports ----------------------------------------------------------------------------------


def _utf8(value: Any) -> Any:
    """``value`` with every string made UTF-8 encodable (a lone surrogate escaped)."""
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode()
        return value
    if isinstance(value, dict):
        return {_utf8(k): _utf8(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_utf8(v) for v in value)
    return value


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(report: Any) -> Any:
    """xdist sends each report to the controller as UTF-8: tests that feed lone surrogates
    through stead log them (captured log, tracebacks), which would crash the worker."""
    data = yield
    return _utf8(data)


# -- the run's PostgreSQL server ----------------------------------------------------------------

_SHARED = "stead_pg_dir"
"""The key, in a worker's ``workerinput``, of the directory where the controller writes the
shared server's URL (file ``url``) or why it has none (file ``none``)."""


class _SharedServer:
    """The controller's server: started in a thread at configure, stopped at unconfigure."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="stead-pg-run-"))
        self.server: PostgresServer | None = None
        self.thread = threading.Thread(target=self._start, name="stead-pg", daemon=True)
        self.thread.start()

    def _start(self) -> None:
        why = "no PostgreSQL server binaries here and STEAD_TEST_POSTGRES_URL is not set"
        try:
            import psycopg  # noqa: F401

            from stead.testing import PostgresServer, postgres_bindir

            if postgres_bindir() is not None:
                # Every worker's pools on one server: room for as many as the four servers had.
                server = PostgresServer(durable=False, max_connections=800)
                self.server = server
                server.__enter__()
                _publish(self.dir, "url", server.url)
                return
        except ImportError:
            why = "psycopg is not installed (pip install -e '.[dev]')"
        except Exception as exc:
            why = f"the run's PostgreSQL server did not start: {exc}"
        _publish(self.dir, "none", why)

    def stop(self) -> None:
        self.thread.join()
        try:
            if self.server is not None:
                self.server.close()
        finally:
            for name in ("url", "none"):
                with contextlib.suppress(OSError):
                    (self.dir / name).unlink()
            with contextlib.suppress(OSError):
                self.dir.rmdir()


def _publish(where: Path, name: str, text: str) -> None:
    """Write a file whole or not at all (a worker may be reading the directory)."""
    part = where / f".{name}"
    part.write_text(text)
    part.rename(where / name)


def _wants_shared(config: pytest.Config) -> bool:
    """Whether this is an xdist controller of a run that may need PostgreSQL."""
    if hasattr(config, "workerinput") or os.environ.get(PG_ENV):
        return False
    if not config.pluginmanager.hasplugin("xdist") or not config.getoption("numprocesses"):
        return False
    return "not system" not in (config.getoption("markexpr") or "")


def pytest_configure(config: pytest.Config) -> None:
    if _wants_shared(config):
        config.stash[_shared_key] = _SharedServer()


def pytest_unconfigure(config: pytest.Config) -> None:
    shared = config.stash.get(_shared_key, None)
    if shared is not None:
        shared.stop()


_shared_key = pytest.StashKey[_SharedServer]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: tell each worker where the shared server's URL will be."""
    shared = node.config.stash.get(_shared_key, None)
    if shared is not None:
        node.workerinput[_SHARED] = str(shared.dir)


def _missing(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{why}; CI is set, so PostgreSQL tests must run, not be skipped")
    pytest.skip(why)


def _shared_url(where: Path) -> str:
    """The URL the controller publishes in ``where``, once its server is up."""
    deadline = time.monotonic() + 300
    while True:
        if (where / "url").exists():
            return (where / "url").read_text()
        if (where / "none").exists():
            _missing((where / "none").read_text())
        if time.monotonic() > deadline:
            pytest.fail("the run's PostgreSQL server did not start in 300 s")
        time.sleep(0.05)  # a server starting in the controller process: nothing to wait on


def _worker_database(server_url: str, worker: str) -> str:
    """A fresh database of this worker's own on the shared server; its URL."""
    import psycopg

    name = f"stead_{re.sub(r'[^a-z0-9_]', '_', worker.lower())}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        # A worker xdist started again in place of a crashed one finds its old database.
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)".encode())
        conn.execute(f"CREATE DATABASE {name}".encode())
    return f"{server_url.rpartition('/')[0]}/{name}"


@pytest.fixture(scope="session")
def postgres_server(request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of a PostgreSQL database for this test session (this worker's own)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _missing("psycopg is not installed (pip install -e '.[dev]')")
    if os.environ.get(PG_ENV):
        yield os.environ[PG_ENV]
        return
    workerinput = getattr(request.config, "workerinput", {})
    if _SHARED in workerinput:
        url = _shared_url(Path(workerinput[_SHARED]))
        yield _worker_database(url, workerinput.get("workerid", "gw"))
        return
    from stead.testing import postgres_bindir, temporary_postgres

    if postgres_bindir() is None:
        _missing(f"no PostgreSQL server binaries here and {PG_ENV} is not set")
    with temporary_postgres(durable=False) as url:
        yield url


def with_schema(url: str, schema: str) -> str:
    """``url`` with its search_path set to ``schema``."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-csearch_path%3D{schema}"


@pytest.fixture
def pg_url(postgres_server: str) -> Iterator[str]:
    """A PostgreSQL URL whose tables live in a fresh schema, dropped after the test."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}".encode())
    try:
        yield with_schema(postgres_server, schema)
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE".encode())


@pytest.fixture(scope="session")
def crashable_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server of the test run's own that tests may SIGKILL and start again.

    Durable (fsync and synchronous commit on): a crash must lose no synced commit, as in
    production. Started from the local binaries even when ``STEAD_TEST_POSTGRES_URL`` is set.
    """
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _missing("psycopg is not installed (pip install -e '.[dev]')")
    from stead.testing import PostgresServer, postgres_bindir

    if postgres_bindir() is None:
        _missing("no PostgreSQL server binaries here to start a server the tests may kill")
    with PostgresServer(durable=True) as server:
        yield server


@pytest.fixture
def crashable_postgres(crashable_server: PostgresServer) -> Iterator[PostgresServer]:
    """``crashable_server``, running (a test before may have left it killed)."""
    if not crashable_server.running:
        crashable_server.start()
    yield crashable_server
    if not crashable_server.running:
        crashable_server.start()


@pytest.fixture
def crashable_pg_url(crashable_postgres: PostgresServer) -> str:
    """A URL on ``crashable_postgres`` whose tables live in a fresh schema."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(crashable_postgres.url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}".encode())
    return with_schema(crashable_postgres.url, schema)
