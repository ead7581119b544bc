-- Postgres's 003 moves its open-item indexes to a table of their own so that state moves of
-- items are HOT updates there. SQLite keeps 001's indexes; this file keeps the two drivers'
-- migration numbers alike.
SELECT 1;
