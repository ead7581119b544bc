-- PostgreSQL's 002 records each message's transaction id, so that its relay never sends a row
-- before an earlier one whose transaction is still open. SQLite has one writer: its rows are
-- numbered in commit order already, and the relay reads them by id. The column is added all
-- the same, always 0, so that both dialects have the same columns (`sluice migrate copy`).
ALTER TABLE outbox_messages ADD COLUMN txid INTEGER NOT NULL DEFAULT 0;
