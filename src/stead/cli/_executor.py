"""``stead executor``: parse the options, set up logging, perform effects until SIGTERM."""

from __future__ import annotations

import argparse

from stead.cli._args import not_negative, positive
from stead.cli._command import command
from stead.cli._worker import LOG_LEVELS, agents_to_serve, serve_until_signalled


def _arguments(e: argparse.ArgumentParser) -> None:
    e.add_argument("--agents", required=True, help="module:attr with the agents whose tools run")
    e.add_argument("--queues", required=True, help="comma-separated queues to serve")
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
    from stead.runtime._pool import Pool

    agents = agents_to_serve(args, "executor")
    return serve_until_signalled(
        Pool(
            args.store,
            agents,
            queues=[q.strip() for q in args.queues.split(",")],
            concurrency=args.concurrency,
            lease_ttl=args.lease_ttl,
            poll_interval=args.poll,
            grace=args.grace,
            max_concurrent=args.max_concurrent,
        )
    )


COMMANDS = (run_executor,)
