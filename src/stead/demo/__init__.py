"""The demo's parts: a local HTTP message service, the agent and its tools, the worker process.

``stead demo`` (in ``stead.cli._demo``) puts them together; tests and users can reuse them.
"""

from stead.demo._agent import agents, build_agent
from stead.demo._service import MessageService

__all__ = ["MessageService", "agents", "build_agent"]
