"""What a ``stead`` subcommand is (``Command``), and what the commands share: loading
``--agents`` and running a coroutine against the store's runtime.

A command is a function made a ``Command`` by ``@command`` (or ``@runtime_command``, for
one that reads or steers runs of the store); its docstring, if it has one, is the description
``stead NAME --help`` shows. Each group of commands is a module with a ``COMMANDS`` tuple;
``stead.cli.GROUPS`` lists those, and the parser is built from them, so adding a command
touches its module and, for a new module, one line of ``GROUPS``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from stead.cli._render import console
from stead.errors import UserError
from stead.runtime import Agent, Runtime, as_agent, resolve_run_id
from stead.store import open_store


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """One ``stead`` subcommand: its name and help, its options, and what it does; or a group
    of subcommands (``stead runs ...``) when it has ``subcommands`` instead of ``run``."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None] | None = None
    """Adds the command's own arguments and options to its parser."""
    run: Callable[[argparse.Namespace], int] | None = None
    """Does it, given the parsed arguments; returns the exit code."""
    description: str | None = None
    """Longer than ``help``: shown by ``stead NAME --help``."""
    subcommands: tuple[Command, ...] = ()

    def add_to(self, sub: Any) -> None:
        """Add this command (and its subcommands) to an ``add_subparsers()`` action."""
        parser = sub.add_parser(self.name, help=self.help, description=self.description)
        if self.arguments is not None:
            self.arguments(parser)
        if self.subcommands:
            children = parser.add_subparsers(dest=f"{self.name}_command", required=True)
            for child in self.subcommands:
                child.add_to(children)
        else:
            assert self.run is not None, f"command {self.name} does nothing"
            parser.set_defaults(handler=self.run)


Arguments = Callable[[argparse.ArgumentParser], None]
RunFn = Callable[[argparse.Namespace], int]
RuntimeFn = Callable[[Runtime, argparse.Namespace, Console], Awaitable[int]]
"""A command's body that works on the store's runtime: (runtime, arguments, console)."""


def _description(fn: Callable[..., Any]) -> str | None:
    return " ".join(fn.__doc__.split()) if fn.__doc__ else None


def command(name: str, help: str, arguments: Arguments | None = None) -> Callable[[RunFn], Command]:
    """Make the function (parsed arguments -> exit code) the command ``name``."""

    def make(fn: RunFn) -> Command:
        return Command(
            name=name, help=help, arguments=arguments, run=fn, description=_description(fn)
        )

    return make


def runtime_command(
    name: str, help: str, arguments: Arguments | None = None, *, run_id: bool = True
) -> Callable[[RuntimeFn], Command]:
    """Make the coroutine (runtime, arguments, console) -> exit code the command ``name``: its
    ``--agents`` loaded (if it has the option), the store opened, the RUN argument resolved
    (a prefix will do) when ``run_id``, then the coroutine."""

    def make(fn: RuntimeFn) -> Command:
        run = _on_runtime(fn, run_id=run_id)
        return Command(
            name=name, help=help, arguments=arguments, run=run, description=_description(fn)
        )

    return make


def _on_runtime(fn: RuntimeFn, *, run_id: bool) -> RunFn:
    def run(args: argparse.Namespace) -> int:
        out = console()
        agents = load_agents(getattr(args, "agents", None), getattr(args, "deps", None))
        deps = load_deps(getattr(args, "deps", None))

        async def go(rt: Runtime) -> int:
            if run_id:
                args.run_id = await resolve_run_id(rt.store, args.run_id)
            return await fn(rt, args, out)

        return asyncio.run(with_runtime(args.store, agents, go, deps=deps))

    return run


async def with_runtime(
    url: str, agents: list[Agent], fn: Callable[[Runtime], Awaitable[int]], *, deps: Any = None
) -> int:
    # Every command run here reads or steers runs that exist: a SQLite file that does not
    # exist is a mistyped path, not a new store to create (run/worker/serve/demo create one).
    async with Runtime(
        open_store(url, create=False), agents=agents, deps=deps, share_progress=True
    ) as rt:
        return await fn(rt)


def _attribute(flag: str, spec: str) -> Any:
    """The object ``module:attr`` names (``flag`` is the option, for messages); the module
    is imported from the working directory first. A ``UserError`` line for any failure."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise UserError(f"{flag} wants module:attribute, got {spec!r}")
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise UserError(
            f"{flag} {spec}: importing module {module_name!r} failed: {one_line(exc)}"
        ) from exc
    try:
        return getattr(module, attr)
    except AttributeError as exc:
        raise UserError(f"{flag} {spec}: module {module_name!r} has no {attr!r}") from exc


DEPS_HELP = (
    "module:factory making the live objects tools read as ctx.deps (called once here if "
    "callable); needed to drive runs of an agent with a deps_type"
)


def add_deps_option(parser: argparse.ArgumentParser, *, when: str = "") -> None:
    """``--deps`` of every command that may drive a run or run a tool (``run``, ``resume``,
    the decisions, ``worker``, ``executor``, ``serve --worker``): one option, one meaning.
    Commands that only read or record need none: tool schemas come from the agent."""
    parser.add_argument("--deps", default=None, help=f"{when}{DEPS_HELP}")


def load_deps(spec: str | None) -> Any:
    """``--deps module:attr``: the live objects this process's tools read as ``ctx.deps``
    (``Runtime(deps=...)``): the attribute itself, or what it returns when it is callable (a
    function or class, called once, here: a connection pool is made in the process that
    uses it). None without the option."""
    if not spec:
        return None
    obj = _attribute("--deps", spec)
    if not callable(obj):
        return obj
    try:
        return obj()
    except Exception as exc:
        attr = spec.partition(":")[2]
        raise UserError(f"--deps {spec}: {attr}() raised {one_line(exc)}") from exc


def load_agents(spec: str | None, deps: str | None = None) -> list[Agent]:
    """``module:attr`` naming an Agent, a list of Agents, or a function returning either.
    Each is marked as loaded by ``spec`` (with ``deps``, the ``--deps`` given beside it):
    the runs they start record it, for the commands printed for them later.

    Whatever goes wrong (the module does not import or raises while importing, the attribute
    is missing, the factory raises, it gives something else) is one ``UserError`` line that
    names the module or factory and the exception: a person fixing their module needs that,
    not a traceback through stead.
    """
    if not spec:
        return []
    attr = spec.partition(":")[2]
    obj: Any = _attribute("--agents", spec)
    if callable(obj) and not isinstance(as_agent(obj), Agent):
        try:
            obj = obj()
        except Exception as exc:
            raise UserError(f"--agents {spec}: {attr}() raised {one_line(exc)}") from exc
    obj = as_agent(obj)
    try:
        agents = [obj] if isinstance(obj, Agent) else [as_agent(a) for a in obj]
    except TypeError:
        agents = [obj]
    if not agents or not all(isinstance(a, Agent) for a in agents):
        raise UserError(
            f"--agents {spec} is {type(obj).__name__}, not an Agent, a list of Agents, or a "
            "function returning one"
        )
    for agent in agents:
        agent.loaded_from = (spec, deps or None)
    return agents


@contextmanager
def server_extra(command_name: str) -> Iterator[None]:
    """Around the imports of ``stead.server`` (an optional extra): without it, a
    ``UserError`` that says what to install, not an ``ImportError`` traceback."""
    try:
        yield
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise UserError(
            f"{command_name} needs the server extra: pip install 'stead[server]' ({exc})"
        ) from exc


def url_of(host: str, port: int) -> str:
    """The address a server bound to ``host``:``port`` is reached at (an IPv6 host in
    brackets), for the line that says it is ready."""
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line (a SyntaxError names its file and line)."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
