"""The store's half of streamed text shared for watchers (``store/ledger/_shared.py``), on
SQLite: whatever streams replace each other under a turn's key, batches follow, rows of an
earlier version (no header) sit there or the key is forgotten, a reader that keeps reading
shows exactly the current stream's frames, in order, and is told each time the stream it
showed was replaced. Hypothesis draws the writers' steps and the reads between them."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from stead.store import (
    forget_progress,
    ledger_for,
    open_shared_progress,
    open_store,
    progress_frames,
    publish_progress,
    shared_progress_frames,
)
from stead.store.ledger import Ledger
from stead.store.lifecycle import atomic, q, sql_store

TEXT = st.text(alphabet="abc ", min_size=1, max_size=3)
STEP = st.one_of(
    st.tuples(st.just("open"), st.lists(TEXT, min_size=1, max_size=3)),  # a new stream
    st.tuples(st.just("more"), st.lists(TEXT, min_size=1, max_size=3)),  # its next batch
    st.tuples(st.just("read"), st.just([])),
    st.tuples(st.just("forget"), st.just([])),  # the writer's turn is over
    st.tuples(st.just("old"), st.lists(TEXT, min_size=1, max_size=3)),  # an earlier version's
)


class Reader:
    """What ``Runtime.follow`` keeps of a turn's shared text (``runtime/_follow.py``)."""

    def __init__(self) -> None:
        self.stream: str | None = None
        self.last = -1
        self.shown: list[str] = []
        self.resets = 0

    async def read(self, ledger: Ledger, key: str) -> None:
        stream, fresh, got = await shared_progress_frames(
            ledger, key, stream=self.stream, after=self.last
        )
        if not got:
            return
        if fresh and self.last >= 0:
            self.shown, self.resets = [], self.resets + 1
        self.stream, self.last = stream, got[-1][0]
        self.shown += [text for _, text in got]


async def _old_rows(ledger: Ledger, key: str, texts: list[str]) -> None:
    """Frames as a writer of an earlier version left them: no header, from sequence 0."""
    store = sql_store(ledger.store)
    async with atomic(store) as s:
        await s.run(q(store, "DELETE FROM ledger_progress WHERE effect_id = ?"), (key,))
        for i, text in enumerate(texts):
            await s.run(q(store, "INSERT INTO ledger_progress VALUES (?, ?, ?, 0)"), (key, i, text))


KEYS = itertools.count()


def test_a_reader_shows_the_current_stream_whole_and_in_order(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"

    @settings(max_examples=60, deadline=None)
    @given(steps=st.lists(STEP, max_size=16))
    def check(steps: list[tuple[str, list[str]]]) -> None:
        asyncio.run(play(steps))

    async def play(steps: list[tuple[str, list[str]]]) -> None:
        store = open_store(url)
        try:
            await steps_of(ledger_for(store), steps)
        finally:
            await store.close()

    async def steps_of(ledger: Ledger, steps: list[tuple[str, list[str]]]) -> None:
        key = f"run:r{next(KEYS)}:0"
        streams = itertools.count()
        current: list[str] | None = None  # the texts the key holds now (None: nothing)
        ours = False  # whether they are a stream this version opened (a writer adds to it)
        replaced = 0  # streams that replaced one the reader had shown
        reader = Reader()
        for kind, texts in steps:
            if kind == "open":
                await open_shared_progress(ledger, key, f"w.{next(streams)}", 0, texts, now=0.0)
                replaced += bool(reader.shown)
                current, ours = list(texts), True
            elif kind == "more" and current is not None and ours:
                await publish_progress(ledger, key, len(current), texts, now=0.0)
                current += texts
            elif kind == "old" and not (reader.stream is None and reader.shown):
                # (Two header-less streams in a row cannot be told apart: only a writer of
                # an earlier version leaves one, and every writer now names its stream.)
                await _old_rows(ledger, key, texts)
                replaced += bool(reader.shown)
                current, ours = list(texts), False
            elif kind == "forget":
                await forget_progress(ledger, key)
                current, ours = None, False
            elif kind == "read":
                await reader.read(ledger, key)
                if current is not None:
                    assert reader.shown == current
                    assert [t for _, t in await progress_frames(ledger, key, -1)] == current
        await reader.read(ledger, key)
        if current is not None:
            assert reader.shown == current
        assert reader.resets <= replaced

    check()
