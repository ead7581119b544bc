-- Postgres's 021 leaves room on tasks' pages for their updates; SQLite has no such setting.
-- This file keeps the two drivers' migration numbers alike.
SELECT 1;
