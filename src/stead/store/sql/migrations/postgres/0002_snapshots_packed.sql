-- One snapshot encoding for both stores: zlib-compressed JSON behind its sha256 line, as
-- SQLite has kept it (store/_sql.py pack). The copy of the conversation a snapshot holds then
-- costs a fraction of its bytes on the wire, in the WAL and in the table, on every rewrite.
--
-- Snapshots written before hold their text; they become its UTF-8 bytes, which the store
-- still decodes uncompressed (store/_sql.py unpack): text that starts with its sha256 line
-- is verified and used; bare JSON, from before snapshots carried a checksum, is ignored and
-- the run's log folded instead, like any snapshot that cannot show it is the one written.
ALTER TABLE snapshots ALTER COLUMN state TYPE BYTEA USING convert_to(state, 'UTF8');
