"""Agents the CLI fuzzer names with ``--agents fuzz_agents:...`` (this folder is on sys.path).

``agent`` is a real one (a scripted model, so nothing leaves the machine); ``broken`` is a
factory that raises, ``not_agent`` is neither an Agent nor a list of them.
"""

from __future__ import annotations

import stead
from stead.testing import ScriptedModel

agent = stead.Agent("cli", ScriptedModel(["[bold]fine[/bold] [/]"]))


def broken() -> stead.Agent:
    raise RuntimeError("the factory could not build its agents")


not_agent = 42
