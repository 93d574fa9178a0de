"""Progress: provisional text deltas of a streaming model reply, in a bounded, lossy window.

Only the final assistant message is durable; these frames are a preview of it. Rules:

- Every model call attempt opens a new **generation** for its run (``begin``). A higher
  generation voids every frame of a lower one: the attempt they belonged to failed, was
  retried, or was cut short. A late frame of a voided generation is dropped.
- Within a generation, frames carry a **sequence** 0, 1, 2... with no holes when produced.
- The window keeps at most ``capacity`` frames per run and evicts the oldest. A reader whose
  cursor points before the oldest kept frame is told so (``gap``): the sequence numbers it
  receives do not follow on from the last one it saw.
- At most ``max_runs`` runs are kept; the run whose generation began longest ago goes first.

Pure: no I/O, no clock, no asyncio. Listeners are plain callables called with each frame as
it is published, in the publisher's thread (the CLI prints from one); one that raises is
counted in ``listener_errors`` and does not disturb the model call.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

ProgressListener = Callable[["ProgressFrame"], None]
"""Receives every frame as it is published."""


class ProgressSink(Protocol):
    """Where an executor sends a model call's text deltas (a ``ProgressWindow``)."""

    def begin(self, run_id: str, turn_index: int) -> Callable[[str], None]:
        """Open a new generation for one model call attempt; returns its delta sink."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgressFrame:
    """One provisional text delta of a streaming model reply."""

    run_id: str
    turn_index: int
    """The turn whose reply is streaming."""
    generation: int
    """Which model call attempt of the run (1, 2...); a higher one voids lower ones."""
    sequence: int
    """Position within the generation, from 0."""
    text: str
    """The delta."""


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a reader is: the last (generation, sequence) it has seen."""

    generation: int = 0
    """0 before any frame."""
    sequence: int = -1
    """-1 before any frame of ``generation``."""


START = Cursor()
"""A reader that has seen nothing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgressRead:
    """What a reader gets back from ``ProgressWindow.read``."""

    frames: tuple[ProgressFrame, ...]
    """Frames after the cursor, oldest first, all of one generation."""
    reset: bool
    """The generation moved past the cursor's: drop provisional text shown so far."""
    gap: bool
    """Frames between the cursor and ``frames[0]`` were evicted from the window."""
    cursor: Cursor
    """Pass this to the next ``read``."""


class _RunWindow:
    __slots__ = ("capacity", "frames", "generation", "next_sequence", "turn_index")

    def __init__(self, generation: int, turn_index: int, capacity: int) -> None:
        self.generation = generation
        self.turn_index = turn_index
        self.next_sequence = 0
        self.capacity = capacity
        self.frames: deque[ProgressFrame] | tuple[()] = ()
        """A deque from the first frame on: an empty one is a block of 64 slots (~0.6 KiB),
        and a run waiting on a model that streams nothing yet (or never) has none."""


class ProgressWindow:
    """Per-run bounded window of the current generation's frames."""

    def __init__(
        self,
        capacity: int = 256,
        *,
        max_runs: int = 1024,
        listeners: Iterable[ProgressListener] = (),
    ) -> None:
        if capacity < 1 or max_runs < 1:
            raise ValueError("capacity and max_runs must be at least 1")
        self.capacity = capacity
        self.max_runs = max_runs
        self._runs: OrderedDict[str, _RunWindow] = OrderedDict()
        self._generations: dict[str, int] = {}
        self._listeners: list[ProgressListener] = list(listeners)
        self.listener_errors = 0
        """Frames a listener raised on (and missed); the run carried on regardless."""

    def subscribe(self, listener: ProgressListener) -> None:
        """Call ``listener`` with every frame published from now on."""
        self._listeners.append(listener)

    def begin(self, run_id: str, turn_index: int) -> Callable[[str], None]:
        """Open the next generation for ``run_id``; returns the delta sink of that attempt.

        The sink drops its deltas once a later generation has begun (a zombie attempt).
        """
        generation = self._generations.get(run_id, 0) + 1
        self._generations[run_id] = generation
        runs = self._runs
        window = runs.get(run_id)
        if window is not None:  # the run's next attempt: its window starts over, moved last
            window.generation, window.turn_index = generation, turn_index
            window.next_sequence, window.frames, window.capacity = 0, (), self.capacity
            runs.move_to_end(run_id)
        else:
            runs[run_id] = _RunWindow(generation, turn_index, self.capacity)
            while len(runs) > self.max_runs:
                old, _ = runs.popitem(last=False)
                self._generations.pop(old, None)

        def emit(text: str) -> None:
            self.publish(run_id, generation, text)

        return emit

    def publish(self, run_id: str, generation: int, text: str) -> ProgressFrame | None:
        """Append a delta to ``generation``; None when that generation is void or empty text."""
        window = self._runs.get(run_id)
        if window is None or window.generation != generation or not text:
            return None
        frame = ProgressFrame(
            run_id=run_id,
            turn_index=window.turn_index,
            generation=generation,
            sequence=window.next_sequence,
            text=text,
        )
        window.next_sequence += 1
        if isinstance(window.frames, tuple):
            window.frames = deque(maxlen=window.capacity)
        window.frames.append(frame)
        for listener in self._listeners:
            try:
                listener(frame)
            except Exception:
                # Progress is a lossy preview: a failing listener must not fail the model call.
                self.listener_errors += 1
        return frame

    def skip(self, run_id: str, generation: int, count: int) -> None:
        """``count`` frames of ``generation`` were lost on their way here (progress from an
        executor far away): the next frame's sequence jumps past them, so a subscriber sees
        the gap as it sees an eviction."""
        window = self._runs.get(run_id)
        if window is not None and window.generation == generation and count > 0:
            window.next_sequence += count

    def generation(self, run_id: str) -> int:
        """The run's current generation (0 if none began)."""
        window = self._runs.get(run_id)
        return window.generation if window else 0

    def read(self, run_id: str, cursor: Cursor = START) -> ProgressRead:
        """Frames after ``cursor``, and whether the reader must reset or missed some."""
        window = self._runs.get(run_id)
        if window is None:
            return ProgressRead(frames=(), reset=False, gap=False, cursor=cursor)
        if window.generation > cursor.generation:
            after, reset = -1, cursor.generation > 0
        else:
            after, reset = cursor.sequence, False
        # The newest frame is always kept, so anything published after the cursor shows.
        frames = tuple(f for f in window.frames if f.sequence > after)
        return ProgressRead(
            frames=frames,
            reset=reset,
            gap=bool(frames) and frames[0].sequence > after + 1,
            cursor=Cursor(window.generation, frames[-1].sequence if frames else after),
        )


def text_of(frames: Iterable[ProgressFrame]) -> str:
    """The provisional text the frames of one generation spell."""
    return "".join(f.text for f in frames)
