-- Postgres's 013 stores its held-lease records uncompressed (SQLite compresses nothing); this
-- file keeps the two drivers' migration numbers alike.
SELECT 1;
