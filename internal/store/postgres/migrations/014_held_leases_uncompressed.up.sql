-- A held batch's record holds the ids and attempts of its tasks, 12 KB for a batch of 1,000:
-- TOAST compressed them with pglz on every insert, about 1 ms of the server's CPU per batch (1 µs
-- a task, 3 % of a no-op burndown's CPU), for a row deleted with the batch's results moments
-- later. Stored out of line uncompressed, the insert costs about a seventh of that (0.15 ms).
ALTER TABLE held_leases ALTER COLUMN task_ids SET STORAGE EXTERNAL, ALTER COLUMN attempts SET STORAGE EXTERNAL;
