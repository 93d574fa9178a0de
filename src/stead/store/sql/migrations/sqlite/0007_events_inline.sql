-- Event rows on a rowid table, so that a row of a few KiB stays on its page.
--
-- 0001 made events a WITHOUT ROWID table clustered on (run_id, seq). Such a table is an
-- index b-tree, whose cells keep at most about a quarter of a 4 KiB page inline: a row over
-- ~1 KB (a tool result of 1 KB is one) spilled the rest into an overflow page of its own,
-- mostly empty. A run of 1,000 such turns took 4.4x its content on disk, 1,000 of its 1,330
-- event pages overflow pages. A rowid table keeps up to ~4 KB of a row on its leaf page, and
-- appends go to the right-most page, full pages behind them; (run_id, seq) is a unique index
-- beside it (the append's key, and what reads walk). Rows are copied in (run, seq) order.
-- data is JSON text, or a BLOB: the zlib stream of that text for a large row (_base.py
-- pack_data), which the reader tells by its first byte.
CREATE TABLE events_inline (
    run_id       TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    kind         TEXT NOT NULL,
    version      INTEGER NOT NULL,
    turn_index   INTEGER,
    tool_call_id TEXT,
    data         TEXT NOT NULL,
    created_at   REAL NOT NULL
);
INSERT INTO events_inline (run_id, seq, kind, version, turn_index, tool_call_id, data, created_at)
    SELECT run_id, seq, kind, version, turn_index, tool_call_id, data, created_at
    FROM events ORDER BY run_id, seq;
DROP TABLE events;
ALTER TABLE events_inline RENAME TO events;
CREATE UNIQUE INDEX events_by_seq ON events (run_id, seq);

-- Guarantee 2: one result per (run, turn, call), enforced by the database itself (as in 0001).
CREATE UNIQUE INDEX events_one_result
    ON events (run_id, turn_index, tool_call_id)
    WHERE kind = 'tool_result_recorded';
