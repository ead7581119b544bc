-- The outbox: messages written in the transaction of the task (or event) they report,
-- deleted by the relay once their sink acknowledged them. id orders them; msg_id is the
-- stable id brokers and consumers deduplicate by.
CREATE TABLE outbox_messages (
    id         bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sink       text    NOT NULL,
    subject    text    NOT NULL,
    msg_id     text    NOT NULL UNIQUE,
    attributes text    NOT NULL,
    body       text    NOT NULL,
    created_at bigint  NOT NULL, -- unix nanoseconds
    attempts   integer NOT NULL DEFAULT 0,
    last_error text    NOT NULL DEFAULT ''
);
CREATE INDEX outbox_messages_sink ON outbox_messages (sink, id);

-- One row per sink: the relay's lease (one process relays a sink) and its counters.
CREATE TABLE outbox_relays (
    sink          text    PRIMARY KEY,
    owner         text    NOT NULL DEFAULT '',
    lease_until   bigint  NOT NULL DEFAULT 0,
    delivered     bigint  NOT NULL DEFAULT 0,
    failures      bigint  NOT NULL DEFAULT 0,
    dropped       bigint  NOT NULL DEFAULT 0,
    last_error    text    NOT NULL DEFAULT '',
    last_error_at bigint  NOT NULL DEFAULT 0
);

-- The installation's id, the first part of every message id: two installations (a fresh data
-- dir) publishing to one stream do not collide on job and item ids.
CREATE TABLE outbox_installation (id text NOT NULL);
INSERT INTO outbox_installation (id) VALUES (substr(md5(random()::text || clock_timestamp()::text), 1, 12));
