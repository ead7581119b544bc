-- PostgreSQL's 002 records each message's transaction id, so that its relay never sends a row
-- before an earlier one whose transaction is still open. SQLite has one writer: its rows are
-- numbered in commit order already, and the relay reads them by id. Nothing to change; the
-- number is kept so that both dialects list the same migrations.
SELECT 1;
