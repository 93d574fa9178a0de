"""The ``stead`` parser is built from the command groups (``stead.cli.GROUPS``), and the API
from its routers (``stead.server._app.ROUTERS``): a command or a route is added in one
module, and nothing else has to know it."""

from __future__ import annotations

import argparse

import pytest

from stead.cli import GROUPS, _parser
from stead.cli._args import Serving, serving
from stead.cli._command import Command, server_extra, url_of
from stead.errors import UserError


def _leaves(command: Command, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Command]]:
    here = (*path, command.name)
    if command.subcommands:
        return [leaf for c in command.subcommands for leaf in _leaves(c, here)]
    return [(here, command)]


LEAVES = [leaf for group in GROUPS for command in group for leaf in _leaves(command)]


def test_every_command_of_the_groups_is_in_the_parser_once() -> None:
    names = [path for path, _ in LEAVES]
    assert len(names) == len(set(names))
    assert {p[0] for p in names} == {
        *[
            "demo",
            "run",
            "runs",
            "store",
            "effects",
            "resume",
            "approve",
            "deny",
            "decide",
            "answer",
            "cancel",
            "worker",
            "executor",
            "serve",
        ]
    }
    parser = _parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert list(subs.choices) == [c.name for group in GROUPS for c in group]


@pytest.mark.parametrize("path", [p for p, _ in LEAVES], ids=" ".join)
def test_each_command_parses_to_its_own_function(path: tuple[str, ...]) -> None:
    command = dict(LEAVES)[path]
    argv = list(path)
    # Fill the positionals with placeholders: what is parsed is the command, not its values.
    parser = _parser()
    probe = argparse.ArgumentParser()
    assert command.arguments is not None or command.name == "runs"
    if command.arguments is not None:
        command.arguments(probe)
    needed = [a for a in probe._actions if not a.option_strings and a.dest != "help"]
    values = {"decision": "skip", "mode": "serve"}
    argv += [values.get(a.dest, "x") for a in needed]
    argv += [
        o
        for a in probe._actions
        if a.required and a.option_strings
        for o in (a.option_strings[0], "x")
    ]
    for group in probe._mutually_exclusive_groups:  # one of them is required: the first
        if group.required:
            argv += [group._group_actions[0].option_strings[0], "x"]
    args = parser.parse_args(argv)
    assert args.handler is command.run


def test_every_api_route_is_in_a_router() -> None:
    from fastapi.routing import APIRoute

    from stead.server._app import ROUTERS

    paths = [
        (r.path, m)
        for router in ROUTERS
        for r in router.routes
        if isinstance(r, APIRoute)
        for m in r.methods
    ]
    assert len(paths) == len(set(paths))
    assert ("/runs/{run_id}/approvals/{call_id}/approve", "POST") in paths
    assert ("/health", "GET") in paths


@pytest.mark.parametrize("command_name", ["stead serve", "stead executor serve"])
def test_a_missing_server_extra_says_what_to_install(command_name: str) -> None:
    # Both serving commands import stead.server through the one guard.
    needs = rf"^{command_name} needs the server extra: pip install"
    with pytest.raises(UserError, match=needs), server_extra(command_name):
        raise ImportError("No module named 'starlette'")


def test_the_ready_line_brackets_an_ipv6_host() -> None:
    assert url_of("127.0.0.1", 8000) == "http://127.0.0.1:8000/"
    assert url_of("::1", 8100) == "http://[::1]:8100/"


@pytest.mark.parametrize(
    ("command_name", "defaults"),
    [
        ("worker", Serving(concurrency=16, lease_ttl=30.0, poll_interval=1.0, grace=30.0)),
        ("executor", Serving(concurrency=8, lease_ttl=15.0, poll_interval=0.5, grace=30.0)),
    ],
)
def test_worker_and_executor_take_the_serving_options_alike(
    command_name: str, defaults: Serving
) -> None:
    # Each keeps its own defaults; the flags mean the same and reach Worker / Pool by name.
    base = [command_name, "--agents", "m:a"]
    assert serving(_parser().parse_args(base)) == defaults
    flags = ["--concurrency", "3", "--poll", "0.25", "--lease-ttl", "9", "--grace", "0"]
    given = serving(_parser().parse_args([*base, *flags]))
    assert given == Serving(concurrency=3, lease_ttl=9.0, poll_interval=0.25, grace=0.0)
