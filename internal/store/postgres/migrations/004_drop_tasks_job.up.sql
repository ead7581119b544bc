-- tasks_job goes. Every lease and every finish of a task writes a new row version with an entry
-- in every index of tasks, tasks_job included, though they never change the job: two of the
-- nine index entries a task's lease and finish wrote. The queries that want a job's tasks (the
-- lists, counts and cancels of one job, none of them on the path of a task) find them through
-- the job's items (items_key) and each item's tasks (tasks_item_step).
DROP INDEX tasks_job;
