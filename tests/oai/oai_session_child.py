"""Send one message to a conversation of the triage agent, then exit:
``python oai_session_child.py CONVERSATION TEXT`` with the store in ``STEAD_TEST_STORE``."""

from __future__ import annotations

import asyncio
import os
import sys

from oai_handoff_support import agent

import stead


async def main(conversation: str, text: str) -> None:
    async with stead.Runtime(os.environ["STEAD_TEST_STORE"], agents=[agent]) as rt:
        view = await rt.send(conversation, text, agent=agent)
    print(view.status.value, view.output)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
