-- held_leases: the record of a held lease (TaskHoldMany), as on Postgres since its 005. A held
-- batch writes nothing to its tasks: this row, committed before they run and deleted in the
-- transaction that commits their results, is what is left of a batch whose process died, and
-- HeldLeaseExpire turns it into lost attempts, so that attempts stay bounded. task_ids and
-- attempts are JSON arrays of the same length. A handful of rows at most: no index.
CREATE TABLE held_leases (
    id       INTEGER PRIMARY KEY,
    owner    TEXT    NOT NULL,
    started  INTEGER NOT NULL,
    expires  INTEGER NOT NULL,
    task_ids TEXT    NOT NULL,
    attempts TEXT    NOT NULL
);
