"""``stead serve``: an HTTP API, a live event stream and a web dashboard over a ``Runtime``.

    stead serve --agents myapp.agents:registry --worker      # dashboard on 127.0.0.1:8000

Needs the ``server`` extra (``pip install 'stead[server]'``). See docs/server.md.
"""

from stead.server._app import create_app, status_of
from stead.server._security import check_bind, is_loopback, parse_tokens, read_token_file
from stead.server._serve import serve

__all__ = [
    "check_bind",
    "create_app",
    "is_loopback",
    "parse_tokens",
    "read_token_file",
    "serve",
    "status_of",
]
