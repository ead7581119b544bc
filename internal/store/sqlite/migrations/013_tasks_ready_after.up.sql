-- Postgres's 013 narrows tasks_ready_after to tasks with a run_after; SQLite's keeps every ready
-- task (TaskNextRunAfter's `run_after > 0` is a range on it). This file keeps the two drivers'
-- migration numbers alike.
SELECT 1;
