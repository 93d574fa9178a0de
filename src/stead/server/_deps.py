"""What every route module of the API shares: who is calling (the bearer token's name), the
runtime the app serves, and the path parameters' types."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from stead.runtime import Runtime, resolve_run_id
from stead.server._models import RunId
from stead.server._security import who

_bearer = HTTPBearer(auto_error=False, description="a token given to `stead serve`")


class Unauthorized(Exception):
    """No valid bearer token on a route that needs one."""


async def _caller(
    request: Request,
    _: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    """The name of the caller's token; 401 without a valid one."""
    name = who(request.app.state.tokens, request.headers.get("authorization"))
    if name is None:
        raise Unauthorized()
    return name


def _runtime(request: Request) -> Runtime:
    """The runtime ``create_app`` was given."""
    runtime: Runtime = request.app.state.runtime
    return runtime


Caller = Annotated[str, Depends(_caller)]
Rt = Annotated[Runtime, Depends(_runtime)]


async def _run_id(
    request: Request,
    _: Annotated[str, Depends(_caller)],
    run_id: Annotated[RunId, Path(description="the run's id, or 4+ of its first characters")],
) -> str:
    """The run the path names: its id, or the start of one that starts no other (the rule
    the CLI and ``stead.runtime.resolve_run_id`` apply); 404 or 400 otherwise. After the
    token is checked: a caller without one learns nothing of which runs exist."""
    return await resolve_run_id(_runtime(request).store, run_id)


RunPath = Annotated[str, Depends(_run_id)]
"""A run named by its id or a unique start of it, resolved before the route runs."""
RawRunPath = Annotated[RunId, Path(description="the run's id, or its start")]
"""A run id taken as it is (a route that resolves it itself)."""
CallPath = Annotated[str, Path(max_length=256, description="the pending call's id")]
