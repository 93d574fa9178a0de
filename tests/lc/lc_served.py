"""A LangChain agent for a ``stead serve --worker`` child (``--agents lc_served:agents``):
``create_agent`` on LangChain's own ``ChatOpenAI`` (``streaming=True``) pointed at the test's
wire server (``LC_BASE_URL``), with stead's middleware; ``lc_streamer`` answers in streamed
text."""

from __future__ import annotations

from langchain.agents import create_agent
from lc_support import model

import stead.langchain as sl

streamer = sl.durable(
    create_agent(model(), [], name="lc_streamer", middleware=[sl.SteadMiddleware()])
)

agents = [streamer]
