-- One result per (ingest_type, base_url) whose platform was identified (Sandcrawler's
-- ingest_fileset_platform): upserted by the fileset workflow's result step.
CREATE TABLE fileset_results (
    ingest_type          TEXT    NOT NULL CHECK (length(ingest_type) >= 1),
    base_url             TEXT    NOT NULL CHECK (length(base_url) >= 1),
    updated_at           INTEGER NOT NULL,
    hit                  INTEGER NOT NULL,
    status               TEXT    NOT NULL CHECK (length(status) >= 1),
    platform_name        TEXT    NOT NULL CHECK (length(platform_name) >= 1),
    platform_domain      TEXT    NOT NULL,
    platform_id          TEXT    NOT NULL,
    ingest_strategy      TEXT,
    total_size           INTEGER,
    file_count           INTEGER,
    archiveorg_item_name TEXT,
    web_bundle_url       TEXT,
    manifest             TEXT,
    result               TEXT    NOT NULL,
    job_id               INTEGER NOT NULL,
    item_id              INTEGER NOT NULL,
    PRIMARY KEY (ingest_type, base_url)
);
CREATE INDEX fileset_results_platform ON fileset_results (platform_name, platform_domain, platform_id);
CREATE INDEX fileset_results_status ON fileset_results (status, ingest_type, base_url);
