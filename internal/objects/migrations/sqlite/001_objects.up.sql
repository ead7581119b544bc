-- Ingest sheets (one per job of the objects workflow), their rows with their validation errors,
-- works and file sets (accession numbers unique across the installation), their derivatives, and
-- Meadow's action states per (object, action) with the history of their outcomes.
CREATE TABLE objects_sheets (
    job_id        INTEGER PRIMARY KEY,
    name          TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    file_state    TEXT    NOT NULL DEFAULT 'pending',
    rows_state    TEXT    NOT NULL DEFAULT 'pending',
    overall_state TEXT    NOT NULL DEFAULT 'pending',
    errors        TEXT    NOT NULL DEFAULT '[]',
    row_count     INTEGER NOT NULL DEFAULT 0,
    updated_at    INTEGER NOT NULL
);
CREATE TABLE objects_sheet_rows (
    job_id INTEGER NOT NULL,
    row_num    INTEGER NOT NULL,
    state  TEXT    NOT NULL,
    fields TEXT    NOT NULL,
    errors TEXT    NOT NULL,
    PRIMARY KEY (job_id, row_num)
);
CREATE TABLE objects_works (
    accession  TEXT    PRIMARY KEY,
    job_id     INTEGER NOT NULL,
    item_id    INTEGER NOT NULL,
    work_type  TEXT    NOT NULL,
    state      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX objects_works_job ON objects_works (job_id);
CREATE TABLE objects_file_sets (
    accession      TEXT    PRIMARY KEY,
    file_set_id    TEXT    NOT NULL UNIQUE,
    job_id         INTEGER NOT NULL,
    item_id        INTEGER NOT NULL,
    work_accession TEXT    NOT NULL,
    row_num            INTEGER NOT NULL,
    role           TEXT    NOT NULL,
    label          TEXT    NOT NULL,
    location       TEXT    NOT NULL,
    mime_type      TEXT    NOT NULL,
    core           TEXT    NOT NULL DEFAULT '{}',
    state          TEXT    NOT NULL,
    updated_at     INTEGER NOT NULL
);
CREATE INDEX objects_file_sets_job ON objects_file_sets (job_id);
CREATE INDEX objects_file_sets_work ON objects_file_sets (work_accession);
CREATE TABLE objects_derivatives (
    file_set_id TEXT    NOT NULL,
    kind        TEXT    NOT NULL,
    value       TEXT    NOT NULL,
    PRIMARY KEY (file_set_id, kind)
);
CREATE TABLE objects_action_states (
    object_id   TEXT    NOT NULL,
    object_type TEXT    NOT NULL,
    action      TEXT    NOT NULL,
    job_id      INTEGER NOT NULL,
    outcome     TEXT    NOT NULL,
    notes       TEXT    NOT NULL DEFAULT '',
    inserted_at INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (object_id, action)
);
CREATE INDEX objects_action_states_job ON objects_action_states (job_id);
CREATE TABLE objects_action_history (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    object_id TEXT    NOT NULL,
    action    TEXT    NOT NULL,
    outcome   TEXT    NOT NULL,
    notes     TEXT    NOT NULL DEFAULT '',
    at        INTEGER NOT NULL,
    UNIQUE (object_id, action, outcome)
);
