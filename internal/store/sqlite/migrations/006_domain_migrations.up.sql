-- domain_migrations records which migrations of each domain (a workflow's own tables: see
-- store.MigrateDomain) this store has applied, as schema_migrations does for the core ones.
CREATE TABLE domain_migrations (
    domain     text    NOT NULL,
    version    integer NOT NULL,
    name       text    NOT NULL DEFAULT '',
    applied_at bigint  NOT NULL,
    PRIMARY KEY (domain, version)
);
