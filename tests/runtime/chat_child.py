"""Child process for conversation tests: send one message to a conversation, print the view.

python chat_child.py STORE CONVERSATION TEXT MESSAGE_ID [wait_for_file]

With ``wait_for_file``, the child waits until that file exists before sending, so several
children send at the same moment. A crash point armed in ``STEAD_CRASH_AT`` kills it where
the test says (``after_message_recorded``, ``mid_model_call``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

import stead
from stead.core.messages import AssistantMessage, UserMessage
from stead.providers import ModelRequest
from stead.testing import ScriptedModel


def echo(request: ModelRequest) -> str:
    """The answer names the message it answers and how many messages came before it: a
    history that lost or interleaved a message shows in the text."""
    users = [m for m in request.messages if isinstance(m, UserMessage)]
    answers = sum(1 for m in request.messages if isinstance(m, AssistantMessage))
    return f"answer to {users[-1].content!r} after {len(users) - 1} messages, {answers} answers"


agent = stead.Agent("chat", ScriptedModel([echo] * 64), [])


def wait_for(gate: str) -> None:
    while gate and not os.path.exists(gate):
        time.sleep(0.005)


async def main(store: str, conversation: str, text: str, message_id: str) -> None:
    async with stead.Runtime(store, agents=[agent], lease_ttl=2.0) as rt:
        view = await rt.send(conversation, text, message_id=message_id, agent=agent)
        print(json.dumps({"run_id": view.run_id, "status": view.status, "output": view.output}))


if __name__ == "__main__":
    args = sys.argv[1:] + [""] * (5 - len(sys.argv[1:]))
    wait_for(args[4])
    asyncio.run(main(*args[:4]))
