"""A local message service for the demo: a real HTTP server on 127.0.0.1.

It assigns a new message id to every POST, like a real email or chat API: calling it twice
sends two messages. It remembers the ``Idempotency-Key`` header of each message so a caller
can later ask "did my message go out?" (``GET /messages?idempotency_key=...``); that lookup is
what the agent's reconcile function uses after a crash.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse


class MessageService:
    """Runs the server in a background thread of the current process."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                if urlparse(self.path).path != "/messages":
                    self._send(404, {"error": "not found"})
                    return
                length = int(self.headers.get("Content-Length", "0"))
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    self._send(400, {"error": "body is not JSON"})
                    return
                with service._lock:
                    message = {
                        "message_id": f"msg_{len(service.messages) + 1:04d}",
                        "to": body.get("to"),
                        "body": body.get("body"),
                        "idempotency_key": self.headers.get("Idempotency-Key"),
                    }
                    service.messages.append(message)
                self._send(201, message)

            def do_GET(self) -> None:
                url = urlparse(self.path)
                if url.path != "/messages":
                    self._send(404, {"error": "not found"})
                    return
                key = parse_qs(url.query).get("idempotency_key", [None])[0]
                with service._lock:
                    found = [
                        m for m in service.messages if key is None or m["idempotency_key"] == key
                    ]
                self._send(200, {"messages": found})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:54321."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> MessageService:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
