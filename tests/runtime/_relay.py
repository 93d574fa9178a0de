"""A TCP relay in a process of its own: ``python _relay.py HOST PORT TARGET_HOST TARGET_PORT``.

It forwards every connection made to HOST:PORT to the target, byte for byte, and prints
``ready PORT`` once it listens (PORT 0: the kernel picks one). A test freezes it with SIGSTOP
to make every connection through it hang as a dead network does (the client's bytes are
accepted by the kernel and never answered), or has it listen on this side's address of a
veth pair so that a network namespace can reach a server that listens on loopback only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def main(host: str, port: int, target_host: str, target_port: int) -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(target_host, target_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(serve, host, port)
    bound = server.sockets[0].getsockname()[1]
    print(f"ready {bound}", flush=True)
    async with server:
        await server.serve_forever()


class Relay:
    """The parent's handle on a relay process (see the module's docstring)."""

    def __init__(self, url: str, *, host: str = "127.0.0.1") -> None:
        """Relay to the server of the PostgreSQL ``url``, listening on ``host``; ``url`` is
        then the same URL through it."""
        parts = urlsplit(url)
        assert parts.hostname and parts.port, url
        command = [sys.executable, str(Path(__file__)), host, "0", parts.hostname, str(parts.port)]
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().split()
        assert line[:1] == ["ready"], f"the relay did not start: {line}"
        user = f"{parts.username}@" if parts.username else ""
        self.url = urlunsplit(parts._replace(netloc=f"{user}{host}:{line[1]}"))

    def signal(self, sig: signal.Signals) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self) -> None:
        self.signal(signal.SIGCONT)
        self.proc.kill()
        self.proc.wait(timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


if __name__ == "__main__":
    h, p, th, tp = sys.argv[1:5]
    asyncio.run(main(h, int(p), th, int(tp)))
