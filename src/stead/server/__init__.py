"""``stead serve``: an HTTP API, a live event stream and a web dashboard over a ``Runtime``.

    stead serve --agents myapp.agents:registry --worker      # dashboard on 127.0.0.1:8000

Needs the ``server`` extra (``pip install 'stead[server]'``). See docs/server.md.
"""

import warnings
from typing import Any

from stead.server._app import create_app, status_of
from stead.server._security import check_bind, is_loopback, parse_tokens
from stead.server._serve import serve_http

__all__ = [
    "check_bind",
    "create_app",
    "is_loopback",
    "parse_tokens",
    "serve_http",
    "status_of",
]

# For the CLI, not part of the public API (hence not in __all__): a fresh token, and the
# executor endpoints ``stead executor serve`` runs.
from stead.server._executor_http import serve_executor as serve_executor
from stead.server._security import new_token as new_token
from stead.server._security import read_token_file as read_token_file


def __getattr__(name: str) -> Any:
    # The old name, kept for programs written against it.
    if name == "serve":
        warnings.warn(
            "stead.server.serve is deprecated; use stead.server.serve_http",
            DeprecationWarning,
            stacklevel=2,
        )
        return serve_http
    raise AttributeError(f"module 'stead.server' has no attribute {name!r}")
