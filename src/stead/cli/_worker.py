"""``stead worker``: parse the options, set up logging, serve until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging

from stead.cli._args import LOG_FORMAT, add_claim_options, add_process_options, positive, serving
from stead.cli._command import add_deps_option, command, load_agents, load_deps
from stead.errors import UserError
from stead.runtime import Agent, Worker, tune_gc
from stead.runtime.processes import Served, until_signalled


def _arguments(w: argparse.ArgumentParser) -> None:
    w.add_argument("--agents", required=True, help="module:attr with the agents to serve")
    add_deps_option(w)
    add_claim_options(w, concurrency=16)
    add_process_options(
        w,
        lease_ttl=30.0,
        lease_help="lease length, seconds",
        log_help="DEBUG logs every run's outcome",
    )
    w.add_argument(
        "--keep",
        action="append",
        metavar="STATUS=DURATION",
        help="prune finished runs of a status older than this, in the background "
        "(completed=30d, failed=90d); repeat",
    )
    w.add_argument(
        "--max-runs", type=positive(int, 10**9), default=None, help="prune past this many per agent"
    )
    w.add_argument(
        "--share-progress",
        action="store_true",
        help="write streamed text to the store for `stead runs watch` in other processes "
        "(a write per streaming run every 50 ms: off by default for a fleet's throughput)",
    )


def agents_to_serve(args: argparse.Namespace, command_name: str) -> list[Agent]:
    """The agents ``--agents`` names (``UserError`` for none), with logging set up at
    ``--log-level``: what ``stead worker`` and ``stead executor`` both start with."""
    agents = load_agents(args.agents, getattr(args, "deps", None))
    if not agents:
        raise UserError(
            f"stead {command_name} needs --agents module:attr naming at least one Agent"
        )
    logging.basicConfig(level=args.log_level, format=LOG_FORMAT)
    return agents


def serve_until_signalled(served: Served) -> int:
    """Serve until SIGTERM or SIGINT; 0 after a clean shutdown."""
    asyncio.run(until_signalled(served))
    return 0


@command("worker", "claim runs from the store and drive them until SIGTERM", _arguments)
def run_worker(args: argparse.Namespace) -> int:
    """Claim queued runs (and runs whose worker died) and drive up to --concurrency of them
    at once. SIGTERM or Ctrl-C: stop claiming, let the runs in hand finish for --grace
    seconds, release the rest; a second signal releases at once. The process is the
    worker's: its garbage collector is set for many runs in flight (``stead.runtime.tune_gc``)
    once everything is loaded."""
    agents = agents_to_serve(args, "worker")
    if args.concurrency < 1:
        raise UserError("--concurrency must be at least 1")
    deps = load_deps(args.deps)
    retention = None
    if args.keep or args.max_runs is not None:
        from stead.cli._lifecycle import retention_of

        retention = retention_of(args.keep, args.max_runs)
    worker = Worker(
        args.store,
        agents,
        deps=deps,
        retention=retention,
        share_progress=args.share_progress,
        **serving(args),
    )
    tune_gc()
    return serve_until_signalled(worker)


COMMANDS = (run_worker,)
