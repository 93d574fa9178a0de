"""``stead runs watch RUN``: follow a run live until it rests.

The timeline grows as events are appended, by this process or any other: ``Runtime.follow``
reads them from the store (SQLite polling, PostgreSQL notices). Streamed text is provisional:
it streams as it arrives from this process, or from the driving process when that one shares
it through the store (``Runtime(share_progress=True)``: ``stead run``, ``stead serve``,
``stead worker --share-progress``); otherwise each reply shows when its turn is recorded.
The watch ends when the run rests: finished, or waiting on a person (nobody drives it then),
and prints its final state.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from stead.cli._hints import Hints
from stead.cli._render import describe, plain, summary
from stead.core.progress import ProgressRead
from stead.core.states import FINISHED, RunStatus
from stead.runtime import Runtime
from stead.store import StoredEvent

RESTING = frozenset({*FINISHED, RunStatus.AWAITING_APPROVAL})
"""Where a watch ends: no worker will move the run until a person does something."""


class _Timeline:
    """Writes events as lines and provisional text as it streams, one below the other."""

    def __init__(self, out: Console) -> None:
        self.out = out
        self.t0: float | None = None
        self.open = False
        self.generation = 0

    def event(self, stored: StoredEvent) -> None:
        self._close()
        if self.t0 is None:
            self.t0 = stored.created_at
        label, detail, style = describe(stored.event)
        # One grid row per event: the detail folds under itself, not under the sequence.
        row = Table.grid(padding=(0, 1))
        row.add_column(justify="right", style="dim", no_wrap=True, width=4)
        row.add_column(justify="right", style="dim", no_wrap=True, width=7)
        row.add_column(no_wrap=True, width=11)
        row.add_column(overflow="fold")
        row.add_row(
            str(stored.seq),
            f"{stored.created_at - self.t0:.1f}s",
            Text(plain(label), style=style),
            Text(plain(detail)),
        )
        self.out.print(row)

    def text(self, read: ProgressRead) -> None:
        if read.reset and self.open:
            self._close()
            self.out.print(Text("     [the reply above was cut off; retrying]", style="dim"))
        for frame in read.frames:
            if not self.open:
                self.out.print(Text("     > ", style="dim"), end="")
                self.open = True
            self.out.print(Text(plain(frame.text)), end="")
        self.out.file.flush()

    def _close(self) -> None:
        if self.open:
            self.out.print()
            self.open = False


async def watch(rt: Runtime, run_id: str, out: Console, hints: Hints | None = None) -> int:
    """Follow ``run_id`` until it rests; 0 when it completed or waits on a person, else 1.
    The commands printed for what waits on a person repeat ``hints``."""
    shown = _Timeline(out)
    try:
        async for item in rt.follow(run_id):
            if item is None:
                continue  # a heartbeat: nothing happened for a while
            if isinstance(item, ProgressRead):
                shown.text(item)
                continue
            shown.event(item)
            record = await rt.store.get_run(run_id)
            if record.status in RESTING and record.last_seq <= item.seq:
                break
    finally:
        shown._close()
    view = await rt.get(run_id)
    hints = (hints or Hints()).for_run((await rt.state(run_id)).config)
    out.print(summary(view, hints))
    return 0 if view.status in (RunStatus.COMPLETED, RunStatus.AWAITING_APPROVAL) else 1
