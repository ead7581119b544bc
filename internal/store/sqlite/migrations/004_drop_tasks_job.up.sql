-- Postgres's 004 drops its tasks_job index (an entry per task update there). SQLite keeps it;
-- this file keeps the two drivers' migration numbers alike.
SELECT 1;
