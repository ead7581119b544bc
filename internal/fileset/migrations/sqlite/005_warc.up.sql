-- Every WARC blob the domain wrote (a capture's: a landing page's, a file's), so that the blob
-- collector keeps it: a landing page's WARC is no item's blob, and its CDX line may be another
-- capture's (the same URL and payload captured in the same second keeps the first line).
-- Written with the capture's CDX line, in its task's transaction.
CREATE TABLE fileset_warc (
    warc_path TEXT NOT NULL PRIMARY KEY CHECK (octet_length(warc_path) = 64)
);
