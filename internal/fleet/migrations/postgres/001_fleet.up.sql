-- The register of what runs tasks: engine processes sharing the database and the remote
-- workers (worker protocol clients) they serve. Each process writes its own row and its remote
-- workers' rows every few seconds; a row not written for a while is stale (its process died),
-- and one not written for an hour is deleted.
CREATE TABLE fleet_members (
    id         text    PRIMARY KEY,
    kind       text    NOT NULL,            -- process or remote
    name       text    NOT NULL,
    via        text    NOT NULL DEFAULT '', -- a remote worker's server process (its id)
    actions    text    NOT NULL,            -- JSON array; empty: every action
    in_flight  bigint  NOT NULL DEFAULT 0,
    polling    bigint  NOT NULL DEFAULT 0,
    started_at bigint  NOT NULL,            -- unix nanoseconds
    seen_at    bigint  NOT NULL,
    stale_at   bigint  NOT NULL             -- flagged stale after this
);
