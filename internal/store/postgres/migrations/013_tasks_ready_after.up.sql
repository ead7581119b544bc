-- tasks_ready_after holds only the ready tasks that wait for a time (a retry's backoff, a
-- released key's task): it had an entry for every ready task, one of the four index entries a
-- ready task's insert writes, though almost every one says run_after = 0. The pick does not use
-- it (task_pick reads tasks_ready and filters on run_after); TaskNextRunAfter, which does, now
-- asks for the earliest run_after > 0: a ready task due at once is the pick's to find.
DROP INDEX tasks_ready_after;
CREATE INDEX tasks_ready_after ON tasks (run_after) WHERE state = 'ready' AND run_after > 0;
