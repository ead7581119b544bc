-- The shared graph (Cartographer's GraphDB): package versions and their relationships, written once
-- by the resolve that fetched them, read by every request of the installation.
CREATE TABLE graph_versions (
    type       TEXT    NOT NULL,
    pkg        TEXT    NOT NULL,
    version    TEXT    NOT NULL,
    state      TEXT    NOT NULL, -- DONE, FAILED (metadata missing) or ERROR (metadata unusable)
    error      TEXT    NOT NULL DEFAULT '',
    job_id     INTEGER NOT NULL,
    item_id    INTEGER NOT NULL,
    PRIMARY KEY (type, pkg, version)
);
CREATE TABLE graph_relationships (
    type       TEXT    NOT NULL,
    pkg        TEXT    NOT NULL,
    version    TEXT    NOT NULL,
    ordinal    INTEGER NOT NULL,
    target     TEXT    NOT NULL,
    advice     TEXT    NOT NULL,
    scope      TEXT    NOT NULL, -- RUNTIME, BUILD_TIME or EXTRA
    kind       TEXT    NOT NULL,
    exclusions TEXT    NOT NULL, -- a JSON array of package names
    PRIMARY KEY (type, pkg, version, ordinal)
);
-- The per-request workspace (Cartographer's WorkDB): the request as registered. Its work items are
-- the job's items.
CREATE TABLE graph_workspaces (
    job_id  INTEGER PRIMARY KEY,
    request TEXT    NOT NULL
);
