-- Waits with a deadline: a step that says deadline: waits for its external events until due_at
-- (micros), after which the engine gives up on it (Engine.ExpireWaits). One row per (item, step),
-- deleted when the step runs or its wait expires.
CREATE TABLE waits (
    item_id bigint NOT NULL,
    step    text   NOT NULL,
    job_id  bigint NOT NULL,
    due_at  bigint NOT NULL,
    PRIMARY KEY (item_id, step)
);
CREATE INDEX waits_due ON waits (due_at);
CREATE INDEX waits_job ON waits (job_id);
