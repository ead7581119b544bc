-- The archive.org item folders the archiveorg-* strategies write: a row per file of an item —
-- the dataset's files (or its bundle), ITEM_meta.xml and ITEM_files.xml — naming the blob that
-- holds its bytes. Written by the result step in its task's transaction; a later success for
-- the same item replaces its files' rows. The blob collector keeps every blob named here.
CREATE TABLE fileset_archiveorg_item (
    item_name TEXT    NOT NULL CHECK (octet_length(item_name) >= 1),
    name      TEXT    NOT NULL CHECK (octet_length(name) >= 1),
    sha256    TEXT    NOT NULL CHECK (octet_length(sha256) = 64),
    size      BIGINT  NOT NULL CHECK (size >= 0),
    source    TEXT    NOT NULL CHECK (source IN ('original', 'metadata')),
    format    TEXT,
    PRIMARY KEY (item_name, name)
);
CREATE INDEX fileset_archiveorg_item_sha256 ON fileset_archiveorg_item (sha256);
