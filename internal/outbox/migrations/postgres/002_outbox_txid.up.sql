-- The transaction that wrote each message, so that the relay reads a row only once every
-- transaction that could still add an earlier one has ended. Identity values are taken in
-- one order and committed in another: without this, a relay could send row 11 (committed)
-- before row 10 (its transaction still open), and the order per subject would depend on when
-- the relay looked. The relay reads rows whose txid is below its snapshot's xmin, ordered by
-- (txid, id): any row committed later has a txid at least that xmin, so it sorts after every
-- row already sent. A bigint (the 64-bit xid8 as a number) rather than xid8, so that rows
-- copied from SQLite (`sluice migrate copy`, txid 0: already committed) fit it.
ALTER TABLE outbox_messages ADD COLUMN txid bigint NOT NULL DEFAULT (pg_current_xact_id()::text::bigint);
CREATE INDEX outbox_messages_sink_txid ON outbox_messages (sink, txid, id);
DROP INDEX outbox_messages_sink;
