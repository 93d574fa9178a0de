"""An Agents SDK agent for a ``stead serve --worker`` child (``--agents oai_served:agents``),
on the SDK's own ``OpenAIChatCompletionsModel`` pointed at the test's wire server
(``OAI_BASE_URL``): ``oai_streamer`` answers in streamed text."""

from __future__ import annotations

from agents import Agent
from oai_support import model

import stead.openai_agents as sa

streamer = sa.durable(Agent(name="oai_streamer", instructions="You answer.", model=model()))

agents = [streamer]
