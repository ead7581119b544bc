-- Outputs an item's later result replaced (an error that a retry made good, or replaced with
-- another): an output is never deleted, it moves here in the transaction that supersedes it.
CREATE TABLE output_history (
    item_id       bigint NOT NULL,
    job_id        bigint NOT NULL,
    kind          text COLLATE "C" NOT NULL,
    value         bytea  NOT NULL,
    created_at    bigint NOT NULL,
    superseded_at bigint NOT NULL
);
CREATE INDEX output_history_item ON output_history (item_id, superseded_at);
