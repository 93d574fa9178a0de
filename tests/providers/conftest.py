from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from wire_server import WireServer

from stead.providers.anthropic import AnthropicModel
from stead.providers.openai import OpenAIModel


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer() as srv:
        yield srv


@pytest.fixture
def claude(server: WireServer) -> AnthropicModel:
    return AnthropicModel("claude-sonnet-4-6", api_key="sk-ant-test", base_url=server.url)


@pytest.fixture
def gpt(server: WireServer) -> OpenAIModel:
    return OpenAIModel("gpt-4.1", api_key="sk-test", base_url=server.url + "/v1")
