-- The test domain's rows: one per (item, step, key), the key of a domain write.
CREATE TABLE testdomain_rows (
    item_id bigint  NOT NULL,
    step    text    NOT NULL,
    key     text    NOT NULL,
    job_id  bigint  NOT NULL,
    task_id bigint  NOT NULL,
    attempt integer NOT NULL,
    payload jsonb   NOT NULL,
    PRIMARY KEY (item_id, step, key)
);
