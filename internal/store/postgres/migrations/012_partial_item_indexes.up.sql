-- SQLite's 012 narrows its item indexes as Postgres's 002 did; this file keeps the two drivers'
-- migration numbers alike.
SELECT 1;
