"""The HTTP API and the dashboard, as one ASGI app over a ``Runtime``.

Each route parses its request, calls one ``Runtime`` method and shapes the answer; the
runtime decides everything. Its errors keep their messages and map to statuses:

    RunNotFound 404 · ApprovalError 409 · UnknownAgent 422 · other UserError 400
    Conflict / LeaseHeld / Fenced / IllegalTransition 409 · StoreError 503

Runs are driven by workers (``stead worker``, or the one ``stead serve --worker`` runs in this
process), never inside a request: creating, approving or resuming a run makes it claimable
and returns at once.

The routes live in router modules (``ROUTERS``: ``_read``, ``_steer``, ``_answer``,
``_chat``, ``_tree``), each
route a function that takes what it needs by dependency (``_deps``: the caller, the
runtime); what the answers look like is ``_shape``. A new route is a function in a router
module; a new module is one line of ``ROUTERS``.
"""

from __future__ import annotations

import logging
from importlib import resources
from typing import Any, Final

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from stead.errors import (
    ApprovalError,
    Conflict,
    Fenced,
    IllegalTransition,
    RunNotFound,
    SteadError,
    StoreError,
    UnknownAgent,
    UserError,
)
from stead.runtime import Runtime
from stead.server import _answer, _browse, _chat, _read, _steer, _tree
from stead.server._deps import Unauthorized
from stead.server._errors import SafeJSON, invalid_request
from stead.server._models import ErrorOut
from stead.server._security import BodyLimit
from stead.server._shape import Waits

log = logging.getLogger("stead.server")

ROUTERS: Final[tuple[APIRouter, ...]] = (
    _read.router,
    _browse.router,
    _steer.router,
    _answer.router,
    _chat.router,
    _tree.router,
)
"""The API's routes, by module, in the order the OpenAPI document lists them."""

_STATUS: list[tuple[type[SteadError], int]] = [
    (RunNotFound, 404),
    (ApprovalError, 409),
    (UnknownAgent, 422),
    (UserError, 400),
    (Conflict, 409),
    (Fenced, 409),
    (IllegalTransition, 409),
    (StoreError, 503),
]

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": what}
    for code, what in (
        (400, "a caller's mistake; the message says what to do"),
        (401, "no valid bearer token"),
        (404, "no such run"),
        (409, "no such pending approval, or the run changed under the request"),
        (413, "request body too large"),
        (422, "a request that does not fit its schema (where and what, never the input)"),
        (503, "the store failed; try again"),
    )
}

_STATIC = resources.files("stead.server") / "static"


def status_of(exc: SteadError) -> int:
    """The HTTP status for a stead error (the first matching class in ``_STATUS``)."""
    for cls, code in _STATUS:
        if isinstance(exc, cls):
            return code
    return 500


def create_app(
    runtime: Runtime,
    tokens: dict[str, str],
    *,
    max_body: int = 64 * 1024,
    heartbeat: float = 15.0,
) -> FastAPI:
    """The ASGI app. ``tokens`` maps each bearer secret to its name (who decided)."""
    app = FastAPI(
        title="stead",
        version="0.1.0",
        summary="See and steer durable agent runs.",
        responses=_ERRORS,
        docs_url=None,
        redoc_url=None,
    )
    app.state.tokens = tokens
    app.state.runtime = runtime
    app.state.heartbeat = heartbeat
    app.state.waits = Waits()
    app.add_exception_handler(Unauthorized, _unauthorized)
    app.add_exception_handler(SteadError, _stead_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, invalid_request)
    for router in ROUTERS:
        app.include_router(router)

    # The dashboard (static files: no data in them, so no token).
    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(str(_STATIC / "index.html"), headers={"Cache-Control": "no-store"})

    app.mount("/static", StaticFiles(directory=str(_STATIC)), name="static")
    app.add_middleware(BodyLimit, limit=max_body)
    return app


async def _unauthorized(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(
        {"error": "Unauthorized", "detail": "send Authorization: Bearer <token>"},
        status_code=401,
        headers={"WWW-Authenticate": "Bearer"},
    )


async def _stead_error(request: Request, exc: SteadError) -> JSONResponse:
    code = status_of(exc)
    if code >= 500:
        log.warning("%s %s failed: %s", request.method, request.url.path, exc)
    return SafeJSON({"error": type(exc).__name__, "detail": str(exc)}, status_code=code)
