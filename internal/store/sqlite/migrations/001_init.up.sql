-- Workflow versions are immutable: a new definition gets the next version; the same digest is reused.
CREATE TABLE workflows (
    name       TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    digest     TEXT    NOT NULL,
    definition TEXT    NOT NULL,
    source     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (name, version)
);
CREATE UNIQUE INDEX workflows_name_digest ON workflows (name, digest);

CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY,
    key              TEXT,
    workflow_name    TEXT    NOT NULL,
    workflow_version INTEGER NOT NULL,
    state            TEXT    NOT NULL,
    error            TEXT    NOT NULL DEFAULT '',
    metadata         TEXT    NOT NULL DEFAULT '{}',
    options          TEXT    NOT NULL DEFAULT '{}',
    total_bytes      REAL    NOT NULL DEFAULT 0,
    -- a job accepting more roots cannot complete until sealed (roots arrive in batches)
    sealed           INTEGER NOT NULL DEFAULT 1,
    created_at       INTEGER NOT NULL,
    finished_at      INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX jobs_key ON jobs (key) WHERE key IS NOT NULL;
CREATE INDEX jobs_state ON jobs (state, id);

-- Items: one node of a job's tree. Roots have parent_id 0 and step ''. A child is keyed by
-- (parent, step, ordinal): the ordinal counts the children one step created, so two steps of the
-- same item that both create children never collide on replay.
CREATE TABLE items (
    id             INTEGER PRIMARY KEY,
    job_id         INTEGER NOT NULL,
    parent_id      INTEGER NOT NULL,
    root_id        INTEGER NOT NULL,
    step           TEXT    NOT NULL,
    ordinal        INTEGER NOT NULL,
    depth          INTEGER NOT NULL,
    sort_key       TEXT    NOT NULL,
    name           TEXT    NOT NULL,
    content_type   TEXT    NOT NULL DEFAULT '',
    blob_sha256    TEXT    NOT NULL DEFAULT '',
    size           INTEGER NOT NULL DEFAULT 0,
    metadata       TEXT    NOT NULL DEFAULT '{}',
    options        TEXT    NOT NULL DEFAULT '{}',
    text           TEXT,
    thumbnail_sha256 TEXT  NOT NULL DEFAULT '',
    thumbnail_type TEXT    NOT NULL DEFAULT '',
    state          TEXT    NOT NULL,
    error          TEXT    NOT NULL DEFAULT '',
    n_children     INTEGER NOT NULL DEFAULT 0,
    range_lo       REAL    NOT NULL DEFAULT 0,
    range_len      REAL    NOT NULL DEFAULT 0,
    share          REAL    NOT NULL DEFAULT 0,
    colored        REAL    NOT NULL DEFAULT 0,
    created_at     INTEGER NOT NULL,
    processed_at   INTEGER NOT NULL DEFAULT 0,
    ingested_at    INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX items_key ON items (job_id, parent_id, step, ordinal);
CREATE INDEX items_job_state ON items (job_id, state);
CREATE INDEX items_parent_state ON items (parent_id, state);
CREATE INDEX items_job_sort ON items (job_id, sort_key);
CREATE INDEX items_blob ON items (blob_sha256);
CREATE INDEX items_thumbnail ON items (thumbnail_sha256);

-- Events are a set per item.
CREATE TABLE events (
    item_id    INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (item_id, name)
) WITHOUT ROWID;

-- Tasks: one row per (item, step), created when the step becomes ready.
CREATE TABLE tasks (
    id              INTEGER PRIMARY KEY,
    job_id          INTEGER NOT NULL,
    item_id         INTEGER NOT NULL,
    step            TEXT    NOT NULL,
    action          TEXT    NOT NULL,
    queue           TEXT    NOT NULL,
    state           TEXT    NOT NULL,
    attempt         INTEGER NOT NULL DEFAULT 0,
    max_attempts    INTEGER NOT NULL,
    run_after       INTEGER NOT NULL DEFAULT 0,
    lease_owner     TEXT    NOT NULL DEFAULT '',
    lease_expires   INTEGER NOT NULL DEFAULT 0,
    error           TEXT    NOT NULL DEFAULT '',
    sort_key        TEXT    NOT NULL,
    progress_weight REAL    NOT NULL DEFAULT 1,
    created_at      INTEGER NOT NULL,
    started_at      INTEGER NOT NULL DEFAULT 0,
    finished_at     INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX tasks_item_step ON tasks (item_id, step);
CREATE INDEX tasks_ready ON tasks (queue, job_id, sort_key) WHERE state = 'ready';
CREATE INDEX tasks_running ON tasks (lease_expires) WHERE state = 'running';
CREATE INDEX tasks_ready_after ON tasks (run_after) WHERE state = 'ready';
CREATE INDEX tasks_job ON tasks (job_id); -- not (job_id, state): every lease and finish would rewrite it

CREATE TABLE attempts (
    task_id     INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    owner       TEXT    NOT NULL,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER NOT NULL,
    error       TEXT    NOT NULL DEFAULT '',
    stack       TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (task_id, attempt)
) WITHOUT ROWID;

CREATE TABLE outputs (
    item_id    INTEGER NOT NULL,
    job_id     INTEGER NOT NULL,
    kind       TEXT    NOT NULL,
    value      TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (item_id, kind)
);
CREATE INDEX outputs_job_kind ON outputs (job_id, kind, item_id);

-- Conversion results by (action, version, settings, input sha256): work is never done twice.
CREATE TABLE cache (
    key        TEXT PRIMARY KEY,
    value      TEXT    NOT NULL,
    created_at INTEGER NOT NULL
);
