"""``stead serve``: parse the options and hand them to ``stead.server.serve_http``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os

from stead.cli._args import LOG_FORMAT, add_claim_options, positive
from stead.cli._command import command, load_agents, server_extra, url_of
from stead.errors import UserError


def _arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--agents", default=None, help="module:attr with the agents runs may start")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    s.add_argument("--port", type=int, default=8000, help="port (0: any free one)")
    s.add_argument(
        "--token",
        action="append",
        default=[],
        help="NAME:SECRET, repeatable; decisions record NAME (also $STEAD_SERVE_TOKENS, "
        "comma-separated)",
    )
    s.add_argument("--worker", action="store_true", help="drive runs in this process too")
    add_claim_options(s, concurrency=8, when="with --worker: ")
    s.add_argument(
        "--max-body", type=positive(int), default=64 * 1024, help="largest request body, bytes"
    )
    s.add_argument("--heartbeat", type=positive(float), default=15.0, help="SSE heartbeat, seconds")


@command("serve", "HTTP API, live stream and dashboard for the runs in the store", _arguments)
def run_serve(args: argparse.Namespace) -> int:
    """Serve the API and the dashboard. Every route but /health needs Authorization: Bearer
    TOKEN; without --token a random one is made (loopback only) and printed in the
    dashboard's URL."""
    # Until SIGTERM/SIGINT; 0 after a clean shutdown.
    agents = load_agents(args.agents)
    with server_extra("stead serve"):
        from stead.server import check_bind, new_token, parse_tokens, serve_http
    if args.worker and not agents:
        raise UserError("--worker needs --agents module:attr naming the agents to drive")
    specs = list(args.token)
    env = os.environ.get("STEAD_SERVE_TOKENS", "")
    specs += [s.strip() for s in env.split(",") if s.strip()]
    tokens = parse_tokens(specs)
    check_bind(args.host, tokens)
    made = None
    if not tokens:
        made = new_token()
        tokens = {made: "local"}
    logging.basicConfig(level="INFO", format=LOG_FORMAT)

    def tell(line: str) -> None:
        print(line, flush=True)

    def ready(port: int) -> None:
        url = url_of(args.host, port)
        if made is not None:
            tell(f"stead serve: {url}#token={made}  (token made for this run, name 'local')")
        else:
            tell(f"stead serve: {url}  (open it and paste a token)")

    # The options that go to ``serve`` as they are, under their own names.
    same = ("host", "port", "worker", "concurrency", "poll", "max_body", "heartbeat")
    options = {name: getattr(args, name) for name in same}
    asyncio.run(serve_http(args.store, agents, tokens=tokens, ready=ready, **options))
    return 0


COMMANDS = (run_serve,)
