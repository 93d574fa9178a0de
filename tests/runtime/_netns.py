"""A network namespace joined to this one by a veth pair, whose link a test takes down to cut
the processes inside off (a partition) and brings up again (the heal). Root only."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest


def need_root_and_ip() -> None:
    """Skip the calling test, saying why, where namespaces cannot be made."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (CI runs as root)")
    if shutil.which("ip") is None:
        pytest.skip("no `ip` command (iproute2) to make network namespaces with")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


class Netns:
    """``name`` (a namespace) reaches this one's ``host`` address over a veth pair, and is
    reached at ``inside``."""

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:6]
        self.name = f"stead_{tag}"
        self._outer = f"vo{tag}"
        net = f"10.{200 + int(tag[:2], 16) % 50}.{int(tag[2:4], 16)}"
        self.host = f"{net}.1"
        self.inside = f"{net}.2"
        _ip("netns", "add", self.name)
        try:
            _ip("link", "add", self._outer, "type", "veth", "peer", "name", f"vi{tag}")
            _ip("link", "set", f"vi{tag}", "netns", self.name)
            _ip("addr", "add", f"{self.host}/30", "dev", self._outer)
            _ip("link", "set", self._outer, "up")
            inner = ["netns", "exec", self.name, "ip"]
            _ip(*inner, "addr", "add", f"{self.inside}/30", "dev", f"vi{tag}")
            _ip(*inner, "link", "set", f"vi{tag}", "up")
            _ip(*inner, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    def cut(self) -> None:
        """The partition: nothing passes the link until ``heal``."""
        _ip("link", "set", self._outer, "down")

    def heal(self) -> None:
        _ip("link", "set", self._outer, "up")

    def close(self) -> None:
        subprocess.run(["ip", "link", "del", self._outer], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=30)
