-- Postgres's 002 narrows its item indexes (each index entry an update writes costs a row version
-- there). SQLite keeps 001's indexes; this file keeps the two drivers' migration numbers alike.
SELECT 1;
