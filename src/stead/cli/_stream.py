"""``stead run``'s live output: a model's provisional text as it streams, then the outcome.

Streamed text is provisional: an attempt that is cut off and retried starts again under a
new generation. A terminal cannot take back what it printed, so the printer says so and
prints the new attempt below; the durable answer is the one in the summary line.
"""

from __future__ import annotations

import sys
from typing import TextIO

from rich.text import Text

from stead.core.pricing import PRICES, PriceTable
from stead.core.progress import ProgressFrame
from stead.runtime import RunView


class StreamPrinter:
    """A progress listener that writes text deltas to a stream as they arrive."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self._generation = 0
        self._turn = -1
        self._open = False

    def __call__(self, frame: ProgressFrame) -> None:
        if frame.generation != self._generation:
            if self._open:
                self.out.write("\n")
            if frame.turn_index == self._turn:
                self.out.write("[the reply above was cut off; retrying]\n")
            self._generation, self._turn = frame.generation, frame.turn_index
        self.out.write(frame.text)
        self.out.flush()
        self._open = True

    def end(self) -> None:
        """Finish the last streamed line."""
        if self._open:
            self.out.write("\n")
            self.out.flush()
            self._open = False


def usage_line(view: RunView, model: str, prices: PriceTable = PRICES) -> Text:
    """Tokens of each kind and what they cost (when the price table knows the model)."""
    u = view.usage
    dollars = prices.cost(u, model)
    cost = f"${dollars:.4f}" if dollars is not None else f"cost unknown (no price for {model})"
    return Text(
        f"usage: {u.input_tokens} in, {u.output_tokens} out, "
        f"{u.cache_creation_input_tokens} cache write, {u.cache_read_input_tokens} cache read"
        f" · {cost}",
        style="dim",
    )
