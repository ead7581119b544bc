-- The register of what runs tasks: engine processes sharing the database and the remote
-- workers (worker protocol clients) they serve. Each process writes its own row and its remote
-- workers' rows every few seconds; a row not written for a while is stale (its process died),
-- and one not written for an hour is deleted.
CREATE TABLE fleet_members (
    id         TEXT    PRIMARY KEY,
    kind       TEXT    NOT NULL,            -- process or remote
    name       TEXT    NOT NULL,
    via        TEXT    NOT NULL DEFAULT '', -- a remote worker's server process (its id)
    actions    TEXT    NOT NULL,            -- JSON array; empty: every action
    in_flight  INTEGER NOT NULL DEFAULT 0,
    polling    INTEGER NOT NULL DEFAULT 0,
    started_at INTEGER NOT NULL,            -- unix nanoseconds
    seen_at    INTEGER NOT NULL,
    stale_at   INTEGER NOT NULL             -- flagged stale after this
);
