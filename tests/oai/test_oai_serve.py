"""An Agents SDK agent's streamed run watched live from another process: a ``stead serve
--worker`` child drives it (the SDK's ``OpenAIChatCompletionsModel``); this process reads the
text deltas from the run's SSE stream while the provider's stream is stalled halfway, and
the run keeps only the finished reply."""

from __future__ import annotations

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")

from pathlib import Path

from _watch_live import served_and_watched


def test_a_streamed_reply_is_read_live_from_another_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served_and_watched(
        tmp_path,
        monkeypatch,
        home=Path(__file__).parent,
        url_env="OAI_BASE_URL",
        agents="oai_served:agents",
        agent="oai_streamer",
    )
