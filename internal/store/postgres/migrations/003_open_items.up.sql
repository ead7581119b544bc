-- open_items holds the id, job, parent and state of every item not yet ingested, and the
-- indexes of 002 that named the item state move here. An index whose key or predicate names a
-- column that an update changes makes Postgres write a new entry in every index of the table
-- (a non-HOT update); without one, the state moves of items (written → ingested, the last write
-- of most items) are HOT updates: the new row version goes on the same page and no index of
-- items is touched. Ingesting an item deletes its row here, which writes no index entry either.
-- The store keeps the two tables in step in the statements that insert items and move their
-- states; an import fills this table from items. A sluice older than this migration does not:
-- stop every older process before migrating (its items would be missing here, or stay here
-- once ingested, and jobs would end too early or never).
CREATE TABLE open_items (
    id        bigint PRIMARY KEY,
    job_id    bigint NOT NULL,
    parent_id bigint NOT NULL,
    state     text   NOT NULL
);
INSERT INTO open_items (id, job_id, parent_id, state) SELECT id, job_id, parent_id, state FROM items WHERE state <> 'ingested';
CREATE INDEX open_items_job ON open_items (job_id);
CREATE INDEX open_items_parent ON open_items (parent_id, state) WHERE parent_id <> 0;
DROP INDEX items_job_open;
DROP INDEX items_parent_open;
-- A HOT update needs room on the row's page. A batch settles consecutive items, often every
-- item of a page in one transaction, whose old versions cannot be pruned before it commits:
-- half of each new page is left free for their new versions.
ALTER TABLE items SET (fillfactor = 50);
