"""Streamed text a process shares for watchers in other processes
(``Runtime(share_progress=True)``), in ``ledger_progress``: one key per run's turn
(``run:RUN:TURN``), and under that key one stream at a time.

A stream is one model call's text as one writer streamed it. Its first batch *opens* it, in
one transaction: every row the key held goes (the stream of a writer killed mid-turn, or this
writer's earlier attempt at the turn), a header row (sequence ``HEADER``) names the new
stream, and its first frames are written from sequence 0. A reader gets the header with the
frames after the last one it showed; a header naming another stream than the one it showed
says that text is void, and it reads the new stream from its first frame.

Without the header, the process that takes a run over and streams its turn again would write
sequence numbers the dead writer's rows already hold (kept, as a retried write's are): a
watcher would miss the new stream's first frames and show the dead writer's text before the
rest. Provisional and lossy as all progress is: only the recorded reply is durable.
"""

from __future__ import annotations

from collections.abc import Sequence

from stead.store.ledger._ledger import Ledger
from stead.store.ledger._progress import INSERT

HEADER = -1
"""The sequence of a stream's header row (its text: the stream's id); frames count from 0."""


async def open_stream(
    ledger: Ledger, key: str, stream: str, first: int, texts: Sequence[str], *, now: float
) -> None:
    """Make ``stream`` the key's stream, with ``texts`` as its frames ``first``, ``first +
    1``...: whatever the key held is deleted in the same transaction (unsynced)."""
    async with ledger._tx(sync=False) as s:
        if ledger.SKIP_FLUSH:
            await s.one(ledger.SKIP_FLUSH)
        await s.run(ledger._q("DELETE FROM ledger_progress WHERE effect_id = ?"), (key,))
        await s.run(ledger._q(INSERT), (key, HEADER, stream, now))
        for i, text in enumerate(texts):
            await s.run(ledger._q(INSERT), (key, first + i, text, now))


async def stream_frames(
    ledger: Ledger, key: str, *, stream: str | None, after: int
) -> tuple[str | None, bool, list[tuple[int, str]]]:
    """The key's stream now (None: no header, as rows of an earlier version have none),
    whether it is another than ``stream`` (the one the reader showed), and its frames: after
    ``after`` when it is the same, all of them when it is another."""
    async with ledger._reading() as s:
        rows = await s.all(
            ledger._q(
                "SELECT seq, text FROM ledger_progress WHERE effect_id = ? "
                "AND (seq = ? OR seq > ?) ORDER BY seq"
            ),
            (key, HEADER, after),
        )
        now = str(rows[0][1]) if rows and int(rows[0][0]) == HEADER else None
        fresh = now != stream
        if fresh and after >= 0:  # another stream: its frames from the first, read again
            rows = await s.all(
                ledger._q("SELECT seq, text FROM ledger_progress WHERE effect_id = ? ORDER BY seq"),
                (key,),
            )
            now = str(rows[0][1]) if rows and int(rows[0][0]) == HEADER else None
    return now, fresh, [(int(q), str(t)) for q, t in rows if int(q) != HEADER]
