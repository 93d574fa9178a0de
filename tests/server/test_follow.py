"""``Runtime.follow``, the live stream under ``GET /runs/{id}/events``: durable events are
never lost, provisional text is, when the reader falls behind (backpressure is the reader's
pace: nothing is buffered for it but the bounded progress window)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from _agents import STREAM_TEXT, build

import stead
from stead.core.progress import ProgressRead, ProgressWindow
from stead.store import StoredEvent


async def test_a_reader_that_keeps_up_sees_the_text_stream_then_every_event(
    tmp_path: Path,
) -> None:
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=build()) as rt:
        run_id = await rt.start("streamer", "go")
        items: list[StoredEvent | ProgressRead | None] = []

        async def read() -> None:
            async for item in rt.follow(run_id, heartbeat=5):
                items.append(item)

        reader = asyncio.create_task(read())
        await rt.run(run_id)
        await asyncio.wait_for(reader, 10)  # ends by itself after the finished run's events
    seqs = [i.seq for i in items if isinstance(i, StoredEvent)]
    assert seqs == list(range(1, seqs[-1] + 1))
    first_turn = next(i for i in items if isinstance(i, ProgressRead)).frames[0].generation
    text = "".join(
        f.text
        for i in items
        if isinstance(i, ProgressRead)
        for f in i.frames
        if f.generation == first_turn
    )
    # A preview: what arrived spells the start of the reply (its last frames may be
    # overtaken by the durable reply, which has all of it).
    assert len(text) > len(STREAM_TEXT) // 2 and STREAM_TEXT.startswith(text)
    # The provisional text came before the durable reply that replaces it.
    kinds = [
        "progress" if isinstance(i, ProgressRead) else i.event.kind for i in items if i is not None
    ]
    assert kinds.index("progress") < kinds.index("assistant_message")


async def test_a_stalled_reader_loses_provisional_frames_never_durable_events(
    tmp_path: Path,
) -> None:
    window = ProgressWindow(capacity=2)
    async with stead.Runtime(
        f"sqlite:///{tmp_path / 'r.db'}", agents=build(), progress=window
    ) as rt:
        run_id = await rt.start("streamer", "go")
        follow = rt.follow(run_id, heartbeat=5)
        first = await follow.__anext__()
        far = asyncio.Event()
        window.subscribe(lambda frame: far.set() if frame.sequence >= 6 else None)
        drive = asyncio.create_task(rt.run(run_id))
        # The reader does not read while the first reply streams well past the window.
        await asyncio.wait_for(far.wait(), 10)
        rest = [item async for item in follow]
        await drive
    seqs = [i.seq for i in [first, *rest] if isinstance(i, StoredEvent)]
    assert seqs == list(range(1, seqs[-1] + 1))
    reads = [i for i in rest if isinstance(i, ProgressRead)]
    assert reads[0].gap and reads[0].frames[0].sequence >= 5  # told that frames were dropped
    assert not any(r.gap for r in reads[1:])  # caught up: the rest follow on
    # Nothing provisional after the run's end: a reply in the log makes its preview stale.
    assert isinstance(rest[-1], StoredEvent) and rest[-1].event.kind == "run_completed"


async def test_heartbeats_while_nothing_happens(tmp_path: Path) -> None:
    async with stead.Runtime(f"sqlite:///{tmp_path / 'r.db'}", agents=build()) as rt:
        run_id = await rt.start("refunds", "go")
        await rt.run(run_id)  # now waiting on a person
        follow = rt.follow(run_id, heartbeat=0.1)
        seen = []
        async for item in follow:
            seen.append(item)
            if item is None:
                break
        await follow.aclose()
    assert seen[-1] is None
    assert [i.event.kind for i in seen[:-1] if isinstance(i, StoredEvent)][-1] == (
        "approval_requested"
    )
