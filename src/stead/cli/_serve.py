"""``stead serve``: parse the options and hand them to ``stead.server.serve_http``."""

from __future__ import annotations

import argparse
import asyncio
import logging

from stead.cli._args import (
    DAY,
    LOG_FORMAT,
    add_claim_options,
    add_token_options,
    port,
    positive,
    token_specs,
)
from stead.cli._command import (
    add_deps_option,
    command,
    load_agents,
    load_deps,
    server_extra,
    url_of,
)
from stead.errors import UserError

TOKENS_ENV = "STEAD_SERVE_TOKENS"


def _arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--agents", default=None, help="module:attr with the agents runs may start")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    s.add_argument("--port", type=port, default=8000, help="port (0: any free one)")
    add_token_options(s, env=TOKENS_ENV)
    s.add_argument("--worker", action="store_true", help="drive runs in this process too")
    add_deps_option(s, when="with --worker: ")
    add_claim_options(s, concurrency=8, when="with --worker: ")
    s.add_argument(
        "--max-body",
        type=positive(int, 1 << 30),
        default=64 * 1024,
        help="largest request body, bytes",
    )
    s.add_argument(
        "--heartbeat", type=positive(float, DAY), default=15.0, help="SSE heartbeat, seconds"
    )


@command("serve", "HTTP API, live stream and dashboard for the runs in the store", _arguments)
def run_serve(args: argparse.Namespace) -> int:
    """Serve the API and the dashboard. Every route but /health needs Authorization: Bearer
    TOKEN, from --token-file (NAME:SECRET lines) or $STEAD_SERVE_TOKENS; without one a
    random token is made (loopback only) and printed in the dashboard's URL."""
    # Until SIGTERM/SIGINT; 0 after a clean shutdown.
    agents = load_agents(args.agents, args.deps)
    deps = load_deps(args.deps)
    with server_extra("stead serve"):
        from stead.server import check_bind, new_token, parse_tokens, serve_http
    if args.worker and not agents:
        raise UserError("--worker needs --agents module:attr naming the agents to drive")
    tokens = parse_tokens(token_specs(args, TOKENS_ENV))
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
    asyncio.run(serve_http(args.store, agents, tokens=tokens, ready=ready, deps=deps, **options))
    return 0


COMMANDS = (run_serve,)
