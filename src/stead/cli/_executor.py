"""``stead executor``: parse the options, set up logging, perform effects until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging

from stead.cli._args import LOG_FORMAT, not_negative, positive
from stead.cli._command import add_deps_option, command, load_agents, load_deps
from stead.cli._worker import LOG_LEVELS
from stead.errors import UserError


def _arguments(e: argparse.ArgumentParser) -> None:
    e.add_argument("--agents", required=True, help="module:attr with the agents whose tools run")
    e.add_argument("--queues", required=True, help="comma-separated queues to serve")
    add_deps_option(e)
    e.add_argument("--concurrency", type=positive(int, 10_000), default=8, help="effects at once")
    e.add_argument(
        "--max-concurrent",
        type=positive(int, 10_000),
        default=None,
        help="hold each queue to N effects at once across every executor (a model's limit)",
    )
    e.add_argument("--poll", type=positive(float), default=0.5, help="seconds between polls")
    e.add_argument("--lease-ttl", type=positive(float), default=15.0, help="lease, seconds")
    e.add_argument("--grace", type=not_negative, default=30.0, help="shutdown grace, seconds")
    e.add_argument(
        "--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS, help="logging level"
    )


@command(
    "executor",
    "perform effects (tool calls routed to --queues) from the store until SIGTERM",
    _arguments,
)
def run_executor(args: argparse.Namespace) -> int:
    """Claim accepted effects of --queues from the store's execution ledger (and effects
    whose executor died), perform up to --concurrency at once with the tools and models of
    --agents, and settle them. A tool goes to a queue with @stead.tool(queue='gpu'); while no
    executor serves its queue it runs in the worker's own process. SIGTERM: claim nothing
    more, finish for --grace seconds, then cancel and give back the rest."""
    # Serve until stopped; 0 after a clean shutdown.
    from stead.runtime._pool import Pool, serve_pool

    agents = load_agents(args.agents)
    if not agents:
        raise UserError("stead executor needs --agents module:attr naming at least one Agent")
    deps = load_deps(args.deps)
    logging.basicConfig(level=args.log_level, format=LOG_FORMAT)
    pool = Pool(
        args.store,
        agents,
        queues=[q.strip() for q in args.queues.split(",")],
        concurrency=args.concurrency,
        lease_ttl=args.lease_ttl,
        poll_interval=args.poll,
        grace=args.grace,
        max_concurrent=args.max_concurrent,
        deps=deps,
    )
    asyncio.run(serve_pool(pool))
    return 0


COMMANDS = (run_executor,)
