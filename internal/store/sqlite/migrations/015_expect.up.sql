-- Postgres's 015 adds sluice_expect, for roots added in one round trip (SQLite adds them in one
-- transaction on its one writer, with no round trip to save); this file keeps the two drivers'
-- migration numbers alike.
SELECT 1;
