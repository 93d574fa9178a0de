"""Finding runs in the database: by status, agent, creation time, a page's cursor, and text (a
run id prefix, a conversation id, words of the search rows), on both stores."""

from __future__ import annotations

import pytest
from _builders import T0, created

from stead.store import RunQuery, RunSearch, Store

pytestmark = pytest.mark.timeout(30)


async def _seed(store: Store) -> RunSearch:
    assert isinstance(store, RunSearch)
    rows = [
        ("abc-1", "Where is order 42?", "chat-7", T0),
        ("abc-2", "Refund 100% of order_9", "", T0 + 10),
        ("xyz-3", "Which colour is the sky?", "chat-7", T0 + 20),
    ]
    for run_id, text, session, at in rows:
        await store.create_run(created(run_id, input=text, session_id=session), now=at)
    stale = await store.stale_search_rows(10)
    assert sorted(stale) == [("abc-1", T0), ("abc-2", T0 + 10), ("xyz-3", T0 + 20)]
    await store.put_search_rows([(r, at, text.lower()) for r, text, _, at in rows])
    assert await store.stale_search_rows(10) == []
    return store


def _ids(records: list) -> list[str]:  # type: ignore[type-arg]
    return [r.run_id for r in records]


async def test_find_runs_by_text_time_and_cursor(store: Store) -> None:
    search = await _seed(store)
    find = search.find_runs
    assert _ids(await find(RunQuery())) == ["xyz-3", "abc-2", "abc-1"]  # newest update first
    assert _ids(await find(RunQuery(text="abc"))) == ["abc-2", "abc-1"]  # an id prefix
    assert _ids(await find(RunQuery(text="chat-7"))) == ["xyz-3", "abc-1"]  # a conversation
    assert _ids(await find(RunQuery(text="ORDER"))) == ["abc-2", "abc-1"]  # a word, any case
    assert _ids(await find(RunQuery(text="sky colour"))) == ["xyz-3"]  # every word
    # LIKE's wildcards are literal characters of the text.
    assert _ids(await find(RunQuery(text="100%"))) == ["abc-2"]
    assert _ids(await find(RunQuery(text="order_9"))) == ["abc-2"]
    assert _ids(await find(RunQuery(text="r_e"))) == []
    assert _ids(await find(RunQuery(created_from=T0 + 5, created_until=T0 + 20))) == ["abc-2"]
    assert _ids(await find(RunQuery(status="queued", agent="support", limit=2))) == [
        "xyz-3",
        "abc-2",
    ]
    assert _ids(await find(RunQuery(agent="other"))) == []
    assert _ids(await find(RunQuery(before=(T0 + 10, "abc-2")))) == ["abc-1"]


async def test_a_run_that_changed_is_stale_again(store: Store) -> None:
    search = await _seed(store)
    await search.put_search_rows([("abc-1", T0 - 1, "old text")])  # written before a change
    assert await search.stale_search_rows(10) == [("abc-1", T0)]
