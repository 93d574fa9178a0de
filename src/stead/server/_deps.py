"""What every route module of the API shares: who is calling (the bearer token's name), the
runtime the app serves, and the path parameters' types."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from stead.runtime import Runtime
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
RunPath = Annotated[RunId, Path(description="the run's id")]
CallPath = Annotated[str, Path(max_length=256, description="the pending call's id")]
