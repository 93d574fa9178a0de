-- Event data as bytes: JSON text in UTF-8, or for a large row the zlib stream of that text
-- (store/_base.py pack_data), which the reader tells by its first byte ('{' or 'x').
--
-- PostgreSQL compresses a value itself only when its row passes ~2 KB (TOAST), so a row of a
-- 1 KB tool result was stored as it is, and a run of 1,000 such turns took 3.6x its content.
-- Existing rows become the UTF-8 bytes of their text (the table is rewritten once) and read
-- back as before. The (run_id, seq) key and the one-result index stay as they were.
ALTER TABLE events ALTER COLUMN data TYPE BYTEA USING convert_to(data, 'UTF8');

-- A snapshot is one row per run, rewritten every few hundred events; each rewrite leaves the
-- old version's compressed state in the TOAST table until a vacuum frees it for reuse. With
-- the default thresholds (20% of the table dead) a long run's old copies pile up (a run of
-- 1,000 tool turns left eight times its live snapshot behind), so autovacuum visits these
-- two as soon as a hundred versions are dead: a visit reads only the pages that changed.
ALTER TABLE snapshots SET (
    autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 100,
    toast.autovacuum_vacuum_scale_factor = 0, toast.autovacuum_vacuum_threshold = 100
);
