-- Narrower item indexes. Every state move of an item (written → processed → ingested) updates a
-- column that an index covers, so Postgres writes a new row version and an entry in every index
-- of the table whose predicate the new version meets: with 001's seven indexes, seven index
-- inserts per move, the largest single cost of a finished task. These indexes leave out the
-- rows no query looks for through them:
--   * ingested items: the open-item checks (JobHasOpenItems, ItemHasChildInState) only ask for
--     created, written or processed items; their queries repeat the predicate so the planner
--     can use the index whatever the parameters;
--   * roots in the parent index: no item has parent 0 (children of a parent are listed through
--     items_key, with the parent's job);
--   * items without a blob or thumbnail in the blob indexes (BlobIsReferenced looks up a sha).
-- A root with no blob that is ingested now writes 3 index entries (primary key, items_key,
-- items_job_sort) instead of 7.
DROP INDEX items_job_state;
DROP INDEX items_parent_state;
DROP INDEX items_blob;
DROP INDEX items_thumbnail;
CREATE INDEX items_job_open ON items (job_id, state) WHERE state <> 'ingested';
CREATE INDEX items_parent_open ON items (parent_id, state) WHERE state <> 'ingested' AND parent_id <> 0;
CREATE INDEX items_blob ON items (blob_sha256) WHERE blob_sha256 <> '';
CREATE INDEX items_thumbnail ON items (thumbnail_sha256) WHERE thumbnail_sha256 <> '';
