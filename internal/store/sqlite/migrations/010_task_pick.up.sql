-- Postgres's 010 adds task_pick, its lease pick with the plan pinned. SQLite pins the same
-- plan in the statement itself (INDEXED BY tasks_ready, sqlite/tasks.go); this file keeps the
-- two drivers' migration numbers alike.
SELECT 1;
