-- The cursors of the S3 prefixes Sluice watches: the key up to which (in key order) every
-- object was turned into a job, so that a poll lists only the keys after it (ListObjectsV2's
-- StartAfter). The objects themselves are recorded by their jobs' keys.
CREATE TABLE watch_cursors (
    location   TEXT    PRIMARY KEY,  -- s3://bucket/prefix
    after_key  TEXT    NOT NULL,
    updated_at INTEGER NOT NULL      -- unix nanoseconds
);
