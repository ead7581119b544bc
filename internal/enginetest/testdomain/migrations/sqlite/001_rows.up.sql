-- The test domain's rows: one per (item, step, key), the key of a domain write.
CREATE TABLE testdomain_rows (
    item_id INTEGER NOT NULL,
    step    TEXT    NOT NULL,
    key     TEXT    NOT NULL,
    job_id  INTEGER NOT NULL,
    task_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    payload TEXT    NOT NULL,
    PRIMARY KEY (item_id, step, key)
);
