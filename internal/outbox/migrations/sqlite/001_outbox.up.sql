-- The outbox: messages written in the transaction of the task (or event) they report,
-- deleted by the relay once their sink acknowledged them. id orders them; msg_id is the
-- stable id brokers and consumers deduplicate by.
CREATE TABLE outbox_messages (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    sink       TEXT    NOT NULL,
    subject    TEXT    NOT NULL,
    msg_id     TEXT    NOT NULL UNIQUE,
    attributes TEXT    NOT NULL,
    body       TEXT    NOT NULL,
    created_at INTEGER NOT NULL, -- unix nanoseconds
    attempts   INTEGER NOT NULL DEFAULT 0,
    last_error TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX outbox_messages_sink ON outbox_messages (sink, id);

-- One row per sink: the relay's lease (one process relays a sink) and its counters.
CREATE TABLE outbox_relays (
    sink          TEXT    PRIMARY KEY,
    owner         TEXT    NOT NULL DEFAULT '',
    lease_until   INTEGER NOT NULL DEFAULT 0,
    delivered     INTEGER NOT NULL DEFAULT 0,
    failures      INTEGER NOT NULL DEFAULT 0,
    dropped       INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT    NOT NULL DEFAULT '',
    last_error_at INTEGER NOT NULL DEFAULT 0
);

-- The installation's id, the first part of every message id: two installations (a fresh data
-- dir) publishing to one stream do not collide on job and item ids.
CREATE TABLE outbox_installation (id TEXT NOT NULL);
INSERT INTO outbox_installation (id) VALUES (lower(hex(randomblob(6))));
