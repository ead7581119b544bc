-- Postgres's 005 adds held_leases, the record of leases held by row locks (TaskHoldMany).
-- SQLite does not hold leases (its one writer would be held while the tasks run); this file
-- keeps the two drivers' migration numbers alike.
SELECT 1;
