-- The blobs the domain's rows reference (preservation copies, derivatives), so that the blob
-- collector keeps them (engine.BlobReferencer).
CREATE TABLE objects_blobs (
    sha256      TEXT NOT NULL,
    file_set_id TEXT NOT NULL,
    kind        TEXT NOT NULL,
    PRIMARY KEY (sha256, file_set_id, kind)
);
