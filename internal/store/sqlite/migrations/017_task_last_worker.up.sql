-- The worker that ran a task's last attempt, kept when the attempt ends (lease_owner is the
-- lease, cleared then): with the attempts table, which records the attempts that failed or were
-- canceled, every attempt in an item's history names its worker. Written by the finish's own
-- UPDATE, not a row per finish.
ALTER TABLE tasks ADD COLUMN last_worker TEXT NOT NULL DEFAULT '';
