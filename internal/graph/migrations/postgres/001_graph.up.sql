-- The shared graph (Cartographer's GraphDB): package versions and their relationships, written once
-- by the resolve that fetched them, read by every request of the installation.
CREATE TABLE graph_versions (
    type       text   NOT NULL,
    pkg        text   NOT NULL,
    version    text   NOT NULL,
    state      text   NOT NULL, -- DONE, FAILED (metadata missing) or ERROR (metadata unusable)
    error      text   NOT NULL DEFAULT '',
    job_id     bigint NOT NULL,
    item_id    bigint NOT NULL,
    PRIMARY KEY (type, pkg, version)
);
CREATE TABLE graph_relationships (
    type       text    NOT NULL,
    pkg        text    NOT NULL,
    version    text    NOT NULL,
    ordinal    integer NOT NULL,
    target     text    NOT NULL,
    advice     text    NOT NULL,
    scope      text    NOT NULL, -- RUNTIME, BUILD_TIME or EXTRA
    kind       text    NOT NULL,
    exclusions text    NOT NULL, -- a JSON array of package names
    PRIMARY KEY (type, pkg, version, ordinal)
);
-- The per-request workspace (Cartographer's WorkDB): the request as registered. Its work items are
-- the job's items.
CREATE TABLE graph_workspaces (
    job_id  bigint PRIMARY KEY,
    request text   NOT NULL
);
