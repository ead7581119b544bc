-- Outputs an item's later result replaced (an error that a retry made good, or replaced with
-- another): an output is never deleted, it moves here in the transaction that supersedes it.
CREATE TABLE output_history (
    item_id       INTEGER NOT NULL,
    job_id        INTEGER NOT NULL,
    kind          TEXT    NOT NULL,
    value         TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    superseded_at INTEGER NOT NULL
);
CREATE INDEX output_history_item ON output_history (item_id, superseded_at);
