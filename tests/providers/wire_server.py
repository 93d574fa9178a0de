"""A real HTTP/1.1 server on 127.0.0.1 that replays scripted provider exchanges.

Each request takes the next scripted ``Reply`` (or, after ``answer_by_turn``, the reply of the
turn its conversation has reached, as a model answers the same conversation the same way): a
JSON body with a status and headers, or a server-sent-event stream (chunked transfer encoding,
as the providers send it) that can be cut mid-body (the socket is closed without the final
chunk, after N events or at any byte), stalled after N events until the test releases it or
the client goes away (which is recorded, with the time it happened), or kept alive with pings
for ever.

The event shapes themselves are built in ``wire_shapes.py``; this module only speaks HTTP.
"""

from __future__ import annotations

import contextlib
import json
import queue
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted response."""

    status: int = 200
    body: Any = None
    """JSON body (for a non-stream reply)."""
    raw: bytes | None = None
    """A body sent as these bytes instead of ``body``, with ``content_type``."""
    content_type: str = "application/json"
    events: list[bytes] = field(default_factory=list)
    """Encoded SSE events (for a stream reply)."""
    headers: dict[str, str] = field(default_factory=dict)
    cut_after: int | None = None
    """Close the connection abruptly after this many events."""
    cut_at_byte: int | None = None
    """Close the connection abruptly after this many bytes of the events (in one chunk)."""
    stall_after: int | None = None
    """Stop after this many events until ``release`` is set or the client disconnects."""
    delay: float = 0.0
    """Seconds to wait before sending the status line."""
    keepalive: bytes | None = None
    """After the events, send this (a ping event, an SSE comment) every ``keepalive_every``
    seconds, for ever: until the client goes away (recorded) or the server stops."""
    keepalive_every: float = 0.05
    pings: int = 0
    """Keep-alives sent so far."""
    stalled: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    client_closed: threading.Event = field(default_factory=threading.Event)
    closed_at: float | None = None

    @property
    def is_stream(self) -> bool:
        return bool(self.events)


@dataclass
class Seen:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class WireServer:
    """Start with ``with WireServer() as srv``; ``srv.url`` is its base URL."""

    def __init__(self) -> None:
        self.replies: queue.Queue[Reply] = queue.Queue()
        self.by_turn: list[Reply] | None = None
        self.requests: list[Seen] = []
        self._stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                server.requests.append(
                    Seen("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                reply = server._next(body)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.is_stream:
                    server._stream(self, reply)
                else:
                    server._json(self, reply)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def push(self, *replies: Reply) -> None:
        for r in replies:
            self.replies.put(r)

    def answer_by_turn(self, *replies: Reply) -> None:
        """Answer each request with ``replies[n]``, ``n`` the assistant turns its conversation
        holds: a turn asked again (by a process that lost its lease mid-call, or one resumed
        after a kill) gets the same answer, however many requests came before."""
        self.by_turn = list(replies)

    def _next(self, body: Any) -> Reply:
        if self.by_turn is not None:
            messages = body.get("messages", []) if isinstance(body, dict) else []
            turn = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
            if turn < len(self.by_turn):
                return self.by_turn[turn]
            return Reply(status=500, body={"error": f"no scripted reply for turn {turn}"})
        try:
            return self.replies.get_nowait()
        except queue.Empty:
            return Reply(status=500, body={"error": "no scripted reply left"})

    def __enter__(self) -> WireServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    # -- writing ---------------------------------------------------------------------------

    def _json(self, h: BaseHTTPRequestHandler, reply: Reply) -> None:
        payload = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
        h.send_response(reply.status)
        h.send_header("content-type", reply.content_type)
        h.send_header("content-length", str(len(payload)))
        for k, v in reply.headers.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(payload)
        h.wfile.flush()

    def _stream(self, h: BaseHTTPRequestHandler, reply: Reply) -> None:
        h.send_response(reply.status)
        h.send_header("content-type", "text/event-stream; charset=utf-8")
        h.send_header("cache-control", "no-cache")
        h.send_header("transfer-encoding", "chunked")
        for k, v in reply.headers.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.flush()
        try:
            if reply.cut_at_byte is not None:
                head = b"".join(reply.events)[: reply.cut_at_byte]
                if head:
                    h.wfile.write(b"%x\r\n%s\r\n" % (len(head), head))
                    h.wfile.flush()
                self._cut(h)
                return
            for i, event in enumerate(reply.events):
                if reply.cut_after is not None and i == reply.cut_after:
                    self._cut(h)
                    return
                if reply.stall_after is not None and i == reply.stall_after:
                    reply.stalled.set()
                    if not self._wait(h, reply):
                        return
                h.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                h.wfile.flush()
            if reply.keepalive is not None:
                self._ping(h, reply, reply.keepalive)
                return
            h.wfile.write(b"0\r\n\r\n")
            h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            reply.client_closed.set()
            h.close_connection = True

    def _ping(self, h: BaseHTTPRequestHandler, reply: Reply, ping: bytes) -> None:
        """Keep the stream alive with nothing in it; raises once the client has gone."""
        while not self._stopping.wait(reply.keepalive_every):
            h.wfile.write(b"%x\r\n%s\r\n" % (len(ping), ping))
            h.wfile.flush()
            reply.pings += 1
        h.close_connection = True

    def _wait(self, h: BaseHTTPRequestHandler, reply: Reply) -> bool:
        """Hold the stream; False if the client went away meanwhile."""
        sock: socket.socket = h.connection
        # poll(), not select(): select() refuses a descriptor above 1023, and a test process
        # that has opened many files and sockets before this one gets such descriptors.
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        while not reply.release.is_set() and not self._stopping.is_set():
            if poller.poll(20):
                try:
                    data = sock.recv(1, socket.MSG_PEEK)
                except OSError:
                    data = b""
                if not data:
                    reply.closed_at = time.monotonic()
                    reply.client_closed.set()
                    h.close_connection = True
                    return False
        return not self._stopping.is_set()

    def _cut(self, h: BaseHTTPRequestHandler) -> None:
        h.close_connection = True
        sock: socket.socket = h.connection
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
