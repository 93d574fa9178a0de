-- Runs found by the start of their id (store/sql/_search.py, run_ids_starting) read a range
-- of ids in byte order. The primary key is in the database's collation: byte order where
-- the database sorts as libc's C does (C, POSIX, C.UTF-8), so that index serves. A
-- language's collation (en_US, any ICU one) may sort 'ab_c' beside 'abc', so there the ids
-- get an index of their own in the C collation. Only there: every update of a run's row
-- writes a new entry into each of its indexes (runs_by_status holds updated_at, so no update
-- is HOT), and a database that sorts bytewise would pay that on every step for nothing.
DO $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_database
        WHERE datname = current_database()
          AND datlocprovider = 'c'
          AND datcollate IN ('C', 'POSIX', 'C.UTF-8', 'C.utf8')
    ) THEN
        CREATE INDEX runs_by_id_bytes ON runs (run_id COLLATE "C");
    END IF;
END
$$;
