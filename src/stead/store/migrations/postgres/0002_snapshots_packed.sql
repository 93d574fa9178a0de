-- One snapshot encoding for both stores: zlib-compressed JSON, as SQLite has kept it from
-- the start (store/_sql.py pack). The copy of the conversation a snapshot holds then costs a
-- fraction of its bytes on the wire, in the WAL and in the table, on every rewrite.
--
-- Snapshots written before hold the JSON as text; they become its UTF-8 bytes, which the
-- store still reads (a snapshot that starts with '{' is plain JSON, store/_sql.py unpack).
ALTER TABLE snapshots ALTER COLUMN state TYPE BYTEA USING convert_to(state, 'UTF8');
