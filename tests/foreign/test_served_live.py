"""An Agents SDK agent's and a LangChain agent's streamed runs watched live from another
process: a ``stead serve --worker`` child drives the run (the SDK's
``OpenAIChatCompletionsModel``; ``ChatOpenAI`` with ``streaming=True``); this process reads
the text deltas from the run's SSE stream while the provider's stream is stalled halfway,
and the run keeps only the finished reply (``_watch_live``, which the Pydantic AI test of
``stead serve`` shares). Each case skips itself without its framework's extra."""

from __future__ import annotations

from pathlib import Path

import pytest
from _watch_live import served_and_watched

TESTS = Path(__file__).parent.parent


@pytest.mark.parametrize(
    ("package", "extra", "prefix"),
    [
        pytest.param("agents", "openai-agents", "oai", id="openai-agents"),
        pytest.param("langchain", "langchain", "lc", id="langchain"),
    ],
)
def test_a_streamed_reply_is_read_live_from_another_process(
    package: str, extra: str, prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip(package, reason=f"the {extra} extra is not installed")
    served_and_watched(
        tmp_path,
        monkeypatch,
        home=TESTS / prefix,
        url_env=f"{prefix.upper()}_BASE_URL",
        agents=f"{prefix}_served:agents",
        agent=f"{prefix}_streamer",
    )
