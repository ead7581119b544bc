-- One result per (ingest_type, base_url) whose platform was identified (Sandcrawler's
-- ingest_fileset_platform): upserted by the fileset workflow's result step.
CREATE TABLE fileset_results (
    ingest_type          text    NOT NULL CHECK (octet_length(ingest_type) >= 1),
    base_url             text    NOT NULL CHECK (octet_length(base_url) >= 1),
    updated_at           bigint  NOT NULL,
    hit                  boolean NOT NULL,
    status               text    NOT NULL CHECK (octet_length(status) >= 1),
    platform_name        text    NOT NULL CHECK (octet_length(platform_name) >= 1),
    platform_domain      text    NOT NULL,
    platform_id          text    NOT NULL,
    ingest_strategy      text,
    total_size           bigint,
    file_count           bigint,
    archiveorg_item_name text,
    web_bundle_url       text,
    manifest             jsonb,
    result               jsonb   NOT NULL,
    job_id               bigint  NOT NULL,
    item_id              bigint  NOT NULL,
    PRIMARY KEY (ingest_type, base_url)
);
CREATE INDEX fileset_results_platform ON fileset_results (platform_name, platform_domain, platform_id);
CREATE INDEX fileset_results_status ON fileset_results (status, ingest_type, base_url);
