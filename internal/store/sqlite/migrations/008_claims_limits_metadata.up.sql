-- Keyed claims, their parked tasks and per-key limits: see the Postgres migration of the same
-- number. SQLite's single writer serialises claims and limits; event correlation scans the
-- job's items in the database (items_key leads with job_id), so no metadata index here.
CREATE TABLE claims (
    key         TEXT    PRIMARY KEY,
    holder      INTEGER NOT NULL,
    state       TEXT    NOT NULL,
    result      TEXT,
    created_at  INTEGER NOT NULL,
    finished_at INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX claims_holder ON claims (holder) WHERE state = 'held';
CREATE TABLE claim_parked (
    key     TEXT    NOT NULL,
    task_id INTEGER NOT NULL,
    PRIMARY KEY (key, task_id)
) WITHOUT ROWID;
CREATE TABLE limit_keys (
    key        TEXT    PRIMARY KEY,
    next_start INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE limit_slots (
    key     TEXT    NOT NULL,
    task_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    PRIMARY KEY (key, task_id)
) WITHOUT ROWID;
