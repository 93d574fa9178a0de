"""Microbenchmark of the event codec: encode, write check, store row, decode, per event kind.

    .venv/bin/python bench/codec.py            # microseconds per call, per kind
    .venv/bin/python bench/codec.py --json     # machine-readable

Every append checks and encodes each event (``event_row``), and every load decodes each row,
so these are the per-event costs on the hot path. The events are the golden log's one row of
every kind (tests/golden/logs/every_kind.json) plus a long assistant reply with tool calls.
"""

from __future__ import annotations

import argparse
import json
import timeit
from pathlib import Path
from typing import Any

from stead.core.event_codec import encode, problem
from stead.core.events import AssistantMessageRecorded
from stead.core.messages import AssistantMessage, ToolCall, Usage
from stead.store.sql._base import decode_row, event_row

GOLDEN = Path(__file__).parents[1] / "tests" / "golden" / "logs" / "every_kind.json"


def _events() -> list[tuple[str, Any]]:
    doc = json.loads(GOLDEN.read_text())
    out = [(kind, decode_row("r", s, kind, v, data)) for s, kind, v, data in doc["rows"]]
    calls = tuple(
        ToolCall(id=f"toolu_{i}", name="lookup", arguments=json.dumps({"order_id": i}))
        for i in range(5)
    )
    reply = AssistantMessage(text="Five orders. " * 8, tool_calls=calls, stop_reason="tool_use")
    usage = Usage(input_tokens=900, output_tokens=80)
    event = AssistantMessageRecorded(turn_index=3, message=reply, usage=usage)
    out.append(("assistant_message(5 calls)", event))
    return out


def _time(fn: Any, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()
    rows = {}
    for name, event in _events():
        kind, version, _, _, text = event_row(event)
        rows[name] = {
            "encode": _time(lambda e=event: encode(e), args.number),
            "check": _time(lambda e=event: problem(e), args.number),
            "row": _time(lambda e=event: event_row(e), args.number),
            "decode": _time(
                lambda k=kind, v=version, t=text: decode_row("r", 1, k, v, t), args.number
            ),
        }
    total = {k: sum(r[k] for r in rows.values()) for k in ("encode", "check", "row", "decode")}
    if args.json:
        print(json.dumps({"per_kind_us": rows, "sum_us": total}, indent=2))
        return
    print(f"{'kind':28} {'encode':>8} {'check':>8} {'row':>8} {'decode':>8}   (µs per call)")
    for name, r in rows.items():
        print(f"{name:28} {r['encode']:8.2f} {r['check']:8.2f} {r['row']:8.2f} {r['decode']:8.2f}")
    r = total
    print(f"{'SUM':28} {r['encode']:8.2f} {r['check']:8.2f} {r['row']:8.2f} {r['decode']:8.2f}")


if __name__ == "__main__":
    main()
