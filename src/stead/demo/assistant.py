"""A small agent to try ``stead run`` with, with or without a real model.

    stead run stead.demo.assistant:agent "Where is order 42?"            # scripted, no key
    stead run stead.demo.assistant:agent "Where is order 42?" --model anthropic:claude-sonnet-4-6

Without ``--model`` it answers from a script (a ``ScriptedModel``), so it runs anywhere.
"""

from __future__ import annotations

import stead
from stead.demo._agent import lookup_order
from stead.testing import Reply, ScriptedModel

agent = stead.Agent(
    "assistant",
    ScriptedModel(
        [
            Reply(text="Let me look that up. ", tool_calls=[("lookup_order", {"order_id": 42})]),
            "Order 42 has shipped with DHL and should arrive on 2026-12-02.",
        ]
    ),
    [lookup_order],
    system="You help customers with their orders. Look orders up before answering; be brief.",
)
"""The agent ``stead run stead.demo.assistant:agent`` loads."""
