"""``stead executor``: parse the options, set up logging, perform effects until SIGTERM.

``stead executor --queues ...`` performs effects from the store's execution ledger
(``stead.runtime.Pool``); ``stead executor serve`` performs them for a run owner over HTTP
(``server._executor_http.serve_executor``): a sandbox that runs tools then needs no database
credentials, only the code and a token."""

from __future__ import annotations

import argparse
import asyncio
import signal
from typing import Any

from stead.cli._args import (
    DAY,
    add_process_options,
    add_token_options,
    port,
    positive,
    serving,
    token_specs,
)
from stead.cli._command import add_deps_option, command, load_deps, server_extra, url_of
from stead.cli._worker import agents_to_serve, serve_until_signalled
from stead.errors import UserError
from stead.runtime import Agent


def _arguments(e: argparse.ArgumentParser) -> None:
    e.add_argument(
        "mode",
        nargs="?",
        choices=["serve"],
        help="serve: perform effects over HTTP for a run owner (HttpExecutor), no store needed",
    )
    e.add_argument("--agents", required=True, help="module:attr with the agents whose tools run")
    e.add_argument("--queues", default=None, help="comma-separated queues to serve from the store")
    add_deps_option(e)
    e.add_argument("--agent", default=None, help="serve: the agent to serve, if --agents has more")
    add_token_options(e, env=None, when="serve: ")
    e.add_argument("--host", default="127.0.0.1", help="serve: address to bind (default loopback)")
    e.add_argument("--port", type=port, default=8100, help="serve: port (0: any free one)")
    e.add_argument("--concurrency", type=positive(int, 10_000), default=8, help="effects at once")
    e.add_argument(
        "--max-concurrent",
        type=positive(int, 10_000),
        default=None,
        help="hold each queue to N effects at once across every executor (a model's limit)",
    )
    e.add_argument("--poll", type=positive(float, DAY), default=0.5, help="seconds between polls")
    add_process_options(e, lease_ttl=15.0, lease_help="lease, seconds")


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
    more, finish for --grace seconds, then cancel and give back the rest. `stead executor
    serve` performs one agent's model and tool calls over HTTP instead (bearer --token
    required), until SIGTERM."""
    from stead.runtime.processes import Pool

    agents = agents_to_serve(args, "executor")
    deps = load_deps(args.deps)
    if args.mode == "serve":
        return _serve(args, agents, deps)
    if not args.queues:
        raise UserError(
            "stead executor needs --queues naming the queues to serve from the store "
            "(or `stead executor serve` to perform effects over HTTP)"
        )
    return serve_until_signalled(
        Pool(
            args.store,
            agents,
            queues=[q.strip() for q in args.queues.split(",")],
            max_concurrent=args.max_concurrent,
            deps=deps,
            **serving(args),
        )
    )


def _serve(args: argparse.Namespace, agents: list[Agent], deps: Any) -> int:
    with server_extra("stead executor serve"):
        from stead.server import parse_tokens, serve_executor
    if args.agent is not None:
        agents = [a for a in agents if a.name == args.agent]
        if not agents:
            raise UserError(f"--agent {args.agent}: no agent of that name in --agents")
    tokens = parse_tokens(token_specs(args, None))

    def ready(port: int) -> None:
        print(f"stead executor serve: {url_of(args.host, port)}", flush=True)

    async def go() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for s in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(s, stop.set)
        await serve_executor(
            agents, tokens=tokens, host=args.host, port=args.port, ready=ready, stop=stop,
            deps=deps,
        )  # fmt: skip

    asyncio.run(go())
    return 0


COMMANDS = (run_executor,)
