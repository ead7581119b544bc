-- The audit log: who changed what, through the API or the web UI. Rows are only added.
CREATE TABLE audit_events (
    id     INTEGER PRIMARY KEY,
    at     INTEGER NOT NULL,            -- unix microseconds
    who    TEXT    NOT NULL,            -- the token's name, or "token ID"
    action TEXT    NOT NULL,            -- cancel, retry, event, approve, workflow
    job_id INTEGER NOT NULL DEFAULT 0,  -- 0: not about a job
    detail TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX audit_events_job ON audit_events (job_id, id);
