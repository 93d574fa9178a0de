"""How the API answers what it refuses: every error body is ``{"error", "detail"}``, as JSON
that any client can read, whatever the request held.

* A request that does not fit its schema (a body, a query, a header) is a 422 rendered here,
  not by FastAPI's default handler: that one echoes the offending input, which fails to
  encode when it holds a lone surrogate or a NaN (a 500 instead of the 422), and hands a
  caller back whatever they sent. Here the answer names where and what (``loc``, ``msg``,
  ``type``), bounded, and never the input.
* Every error body is written with ASCII escapes (``\\ud800`` for a lone surrogate a
  runtime's message quotes), so no message can fail to encode.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

_PROBLEMS = 20
"""Problems listed in one 422 (a body with a thousand wrong fields gets the first ones)."""

_TEXT = 300
"""Characters of one message or location part shown."""


class SafeJSON(JSONResponse):
    """A JSON response any text can be written in: everything beyond ASCII as an escape, a
    lone surrogate included, where UTF-8 encoding would fail. (Error bodies hold text and
    ints only, never a float NaN.)"""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _cut(text: str) -> str:
    return text if len(text) <= _TEXT else text[: _TEXT - 3] + "..."


def problems(exc: RequestValidationError) -> list[dict[str, Any]]:
    """What was wrong, without the input: (where, what, the error's type) per problem."""
    out = []
    for error in exc.errors()[:_PROBLEMS]:
        loc = [p if isinstance(p, int) else _cut(str(p)) for p in error.get("loc", ())]
        out.append(
            {"loc": loc, "msg": _cut(str(error.get("msg", ""))), "type": str(error.get("type"))}
        )
    return out


async def invalid_request(request: Request, exc: Exception) -> JSONResponse:
    """A 422 for a request that does not fit its schema; the input is never echoed."""
    assert isinstance(exc, RequestValidationError)
    found = problems(exc)
    where = "; ".join(
        ".".join(str(p) for p in problem["loc"]) + f": {problem['msg']}" for problem in found
    )
    more = len(exc.errors()) - len(found)
    detail = (where or "the request does not fit its schema") + (
        f" (and {more} more)" if more > 0 else ""
    )
    return SafeJSON(
        {"error": "RequestInvalid", "detail": detail, "problems": found}, status_code=422
    )
