-- SQLite's 011 adds held_leases, which Postgres has had since its 005; this file keeps the two
-- drivers' migration numbers alike.
SELECT 1;
