-- The CDX index of the captures the web-* strategies write (one WARC blob per downloaded file):
-- a line per capture, written in the download task's transaction. check-existing decides
-- success-existing by it.
CREATE TABLE fileset_cdx (
    url         TEXT    NOT NULL CHECK (octet_length(url) >= 1),
    sha1hex     TEXT    NOT NULL CHECK (octet_length(sha1hex) = 40),
    datetime    TEXT    NOT NULL CHECK (octet_length(datetime) = 14),
    surt        TEXT    NOT NULL,
    mimetype    TEXT    NOT NULL,
    status_code INTEGER NOT NULL,
    sha1b32     TEXT    NOT NULL,
    warc_csize  INTEGER NOT NULL,
    warc_offset INTEGER NOT NULL,
    warc_path   TEXT    NOT NULL CHECK (octet_length(warc_path) >= 1),
    PRIMARY KEY (url, sha1hex, datetime)
);
CREATE INDEX fileset_cdx_surt ON fileset_cdx (surt, datetime);
