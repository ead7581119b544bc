-- The CDX index names the WARC blobs of captures no item holds (landing pages'): the blob
-- collector asks it by warc_path.
CREATE INDEX fileset_cdx_warc_path ON fileset_cdx (warc_path);
