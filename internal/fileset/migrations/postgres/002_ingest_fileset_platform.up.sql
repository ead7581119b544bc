-- The design's table (Sandcrawler's ingest_fileset_platform), exactly: one row per
-- (ingest_type, base_url) whose platform was identified, upserted by the fileset workflow's
-- result step in its task's transaction.
CREATE TABLE IF NOT EXISTS ingest_fileset_platform (
    ingest_type             TEXT NOT NULL CHECK (octet_length(ingest_type) >= 1),
    base_url                TEXT NOT NULL CHECK (octet_length(base_url) >= 1),
    updated                 TIMESTAMP WITH TIME ZONE DEFAULT now() NOT NULL,
    hit                     BOOLEAN NOT NULL,
    status                  TEXT CHECK (octet_length(status) >= 1),

    platform_name           TEXT NOT NULL CHECK (octet_length(platform_name) >= 1),
    platform_domain         TEXT NOT NULL CHECK (octet_length(platform_domain) >= 1),
    platform_id             TEXT NOT NULL CHECK (octet_length(platform_id) >= 1),
    ingest_strategy         TEXT CHECK (octet_length(ingest_strategy) >= 1),
    total_size              BIGINT,
    file_count              BIGINT,
    archiveorg_item_name    TEXT CHECK (octet_length(archiveorg_item_name) >= 1),

    archiveorg_item_bundle_path TEXT CHECK (octet_length(archiveorg_item_bundle_path) >= 1),
    web_bundle_url          TEXT CHECK (octet_length(web_bundle_url) >= 1),
    web_bundle_dt           TEXT CHECK (octet_length(web_bundle_dt) = 14),

    manifest                JSONB,

    PRIMARY KEY (ingest_type, base_url)
);
CREATE INDEX ingest_fileset_platform_name_domain_id_idx ON ingest_fileset_platform(platform_name, platform_domain, platform_id);

-- Beside each row, what the design's columns do not hold: the whole result (its request,
-- terminal, html_biblio, fileset_file, …) and the task that wrote it. Written with its row, in
-- the same transaction, whenever the row is (ResultStore.Put).
CREATE TABLE ingest_fileset_platform_result (
    ingest_type TEXT   NOT NULL,
    base_url    TEXT   NOT NULL,
    result      JSONB  NOT NULL,
    job_id      BIGINT NOT NULL,
    item_id     BIGINT NOT NULL,
    PRIMARY KEY (ingest_type, base_url)
);

-- The rows of fileset_results move: updated_at was Unix nanoseconds; an archiveorg_item_name
-- is kept only for an archiveorg-* strategy, empty texts become NULL.
INSERT INTO ingest_fileset_platform (ingest_type, base_url, updated, hit, status, platform_name, platform_domain,
    platform_id, ingest_strategy, total_size, file_count, archiveorg_item_name, web_bundle_url, manifest)
SELECT ingest_type, base_url, to_timestamp(0) + (updated_at / 1000) * interval '1 microsecond', hit, status,
    platform_name, platform_domain, platform_id, NULLIF(ingest_strategy, ''), total_size, file_count,
    CASE WHEN ingest_strategy LIKE 'archiveorg-%' THEN NULLIF(archiveorg_item_name, '') END,
    NULLIF(web_bundle_url, ''), manifest
FROM fileset_results;
INSERT INTO ingest_fileset_platform_result (ingest_type, base_url, result, job_id, item_id)
SELECT ingest_type, base_url, result, job_id, item_id FROM fileset_results;
DROP TABLE fileset_results;
