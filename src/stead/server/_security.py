"""Who may call the API, and how much they may send.

* Every route but ``/health`` and the dashboard's static files (which hold no data) needs
  ``Authorization: Bearer <token>``. Tokens have names; a decision records the name as who
  made it. Tokens are compared in constant time (``hmac.compare_digest``), against every
  configured token, so timing tells nothing about which one nearly matched.
* No cookies: the dashboard keeps the token in the browser's session storage and sends the
  header itself, so a cross-site page cannot make the browser act with it (no CSRF surface).
* Request bodies over ``max_body`` bytes are refused with 413 before the app reads them.
* A non-loopback bind without a configured token is refused (``check_bind``).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
from collections.abc import Mapping
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from stead.errors import UserError


def parse_tokens(specs: list[str]) -> dict[str, str]:
    """``NAME:SECRET`` specs to {secret: name}; a bare ``SECRET`` is named ``api``."""
    tokens: dict[str, str] = {}
    for spec in specs:
        name, sep, secret = spec.partition(":")
        if not sep:
            name, secret = "api", spec
        if not name or len(secret) < 16:
            raise UserError(
                f"token {name or '?'!r}: give NAME:SECRET with a secret of at least 16 "
                "characters (python -c 'import secrets; print(secrets.token_urlsafe())')"
            )
        if secret in tokens:
            raise UserError(f"tokens {tokens[secret]!r} and {name!r} have the same secret")
        tokens[secret] = name
    return tokens


def read_token_file(path: str) -> list[str]:
    """The ``NAME:SECRET`` specs of a token file: one a line; blank lines and lines that
    start with ``#`` are skipped. A file nobody else may read keeps the secrets off the
    command line, where every local user sees them (``ps``, ``/proc/PID/cmdline``)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(1 << 20)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UserError(f"--token-file {path!r} cannot be read: {reason}") from None
    specs = [ln.strip() for ln in text.splitlines()]
    specs = [ln for ln in specs if ln and not ln.startswith("#")]
    if not specs:
        raise UserError(f"--token-file {path!r} holds no token; write NAME:SECRET lines in it")
    return specs


def new_token() -> str:
    """A fresh random secret for a loopback server started without one."""
    return secrets.token_urlsafe(24)


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, tokens: Mapping[str, str]) -> None:
    """Refuse to listen beyond this machine without a token someone chose."""
    if not is_loopback(host) and not tokens:
        raise UserError(
            f"refusing to listen on {host} without a token: anyone who can reach it could "
            "steer your runs; pass --token-file FILE (NAME:SECRET lines) or set "
            "$STEAD_SERVE_TOKENS, or bind "
            "127.0.0.1"
        )


def who(tokens: Mapping[str, str], header: str | None) -> str | None:
    """The name of the token in an ``Authorization: Bearer`` header, or None."""
    if not header:
        return None
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given:
        return None
    found = None
    raw = given.strip().encode()
    for secret, name in tokens.items():
        # Every token is compared, matched or not: constant time across the whole set.
        if hmac.compare_digest(raw, secret.encode()):
            found = name
    return found


class BodyLimit:
    """ASGI middleware: read at most ``limit`` bytes of a request body, else answer 413."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", ())).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await _too_large(send, self.limit)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.limit:
                await _too_large(send, self.limit)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _too_large(send: Send, limit: int) -> None:
    body: dict[str, Any] = {
        "error": "PayloadTooLarge",
        "detail": f"request body larger than {limit} bytes",
    }
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})
