-- Waits with a deadline: a step that says deadline: waits for its external events until due_at
-- (micros), after which the engine gives up on it (Engine.ExpireWaits). One row per (item, step),
-- deleted when the step runs or its wait expires.
CREATE TABLE waits (
    item_id INTEGER NOT NULL,
    step    TEXT    NOT NULL,
    job_id  INTEGER NOT NULL,
    due_at  INTEGER NOT NULL,
    PRIMARY KEY (item_id, step)
) WITHOUT ROWID;
CREATE INDEX waits_due ON waits (due_at);
CREATE INDEX waits_job ON waits (job_id);
