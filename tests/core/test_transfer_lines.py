"""The export format's lines (``stead.core.transfer``): what is written reads back, a header
of a newer format is refused, and every field is checked."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stead.core import transfer


def test_the_header_and_a_newer_format() -> None:
    assert transfer.read_header(transfer.header()) == transfer.FORMAT == 1
    with pytest.raises(ValueError, match="newer than this stead reads"):
        transfer.read_header(json.dumps({"stead_export": transfer.FORMAT + 1}))
    for bad in ("", "[]", '{"stead_export": "1"}', '{"stead_export": 0}', '{"x": 1}'):
        with pytest.raises(ValueError, match="not a stead export"):
            transfer.read_header(bad)


TEXT = st.text(max_size=8)
NUM = st.floats(allow_nan=False, allow_infinity=False, width=64)


@given(TEXT, st.integers(1, 10**6), TEXT, st.integers(1, 9), NUM, st.dictionaries(TEXT, TEXT))
def test_an_event_line_reads_back_the_same(
    run_id: str, seq: int, kind: str, version: int, at: float, data: dict[str, str]
) -> None:
    fields = {
        "run_id": run_id,
        "seq": seq,
        "kind": kind,
        "version": version,
        "created_at": at,
        "data": data,
    }
    text = transfer.line("event", **fields)
    assert "\n" not in text
    assert transfer.read_line(text) == {"type": "event", **fields}
    assert transfer.line("event", **fields) == text  # the same content, the same bytes


@pytest.mark.parametrize(
    ("record", "says"),
    [
        ({"type": "run"}, "'run_id' is missing"),
        (
            {"type": "link", "run_id": "a", "source_id": "b", "kind": "fork", "x": 1},
            "unknown field",
        ),
        ({"type": "link", "run_id": 1, "source_id": "b", "kind": "fork"}, "is int, not str"),
        ({"type": "end", "runs": True, "records": 1}, "is bool"),
        ({"type": "nope"}, "unknown record type"),
    ],
)
def test_a_bad_record_says_what_is_wrong(record: dict[str, object], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        transfer.read_line(json.dumps(record))
