package fileset

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
)

// DomainName is the name the fileset_results table's domain registers under.
const DomainName = "fileset"

//go:embed migrations
var migrations embed.FS

// Domain is the fileset_results table: the result of each request whose platform was
// identified, keyed by (ingest_type, base_url). The zero value is ready to register.
type Domain struct{}

// Register registers the domain with the engine and applies its migrations.
func Register(ctx context.Context, e *engine.Engine) error {
	return e.RegisterDomain(ctx, DomainName, Domain{})
}

// Migrations implements [engine.Domain].
func (Domain) Migrations(d store.Dialect) []store.DomainMigration {
	return store.MustDomainMigrations(migrations, "migrations", d)
}

// resultWrite is the payload of a write to fileset_results.
type resultWrite struct {
	Updated int64  `json:"updated"`
	Result  Result `json:"result"`
}

func rebind(d store.Dialect, q string) string { return store.Rebind(d, q) }

const upsert = `INSERT INTO fileset_results (ingest_type, base_url, updated_at, hit, status, platform_name, platform_domain,
	platform_id, ingest_strategy, total_size, file_count, archiveorg_item_name, web_bundle_url, manifest, result, job_id, item_id)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (ingest_type, base_url) DO UPDATE SET updated_at = excluded.updated_at, hit = excluded.hit,
	status = excluded.status, platform_name = excluded.platform_name, platform_domain = excluded.platform_domain,
	platform_id = excluded.platform_id, ingest_strategy = excluded.ingest_strategy, total_size = excluded.total_size,
	file_count = excluded.file_count, archiveorg_item_name = excluded.archiveorg_item_name,
	web_bundle_url = excluded.web_bundle_url, manifest = excluded.manifest, result = excluded.result,
	job_id = excluded.job_id, item_id = excluded.item_id
	WHERE fileset_results.updated_at <= excluded.updated_at`

// Apply implements [engine.Domain]: an upsert per result, the later result winning (a replay of
// the same write changes nothing).
func (Domain) Apply(ctx context.Context, x store.DomainSQL, ws []engine.DomainWrite) error {
	q := rebind(x.Dialect(), upsert)
	for _, w := range ws {
		var p resultWrite
		if err := json.Unmarshal(w.Payload, &p); err != nil {
			return fmt.Errorf("fileset result %q: %w", w.Key, err)
		}
		r := p.Result
		var req Request
		_ = json.Unmarshal(r.Request, &req)
		if r.PlatformName == "" || req.BaseURL == "" || req.IngestType == "" {
			return fmt.Errorf("fileset result %q: no platform, base_url or ingest_type", w.Key)
		}
		manifest, _ := json.Marshal(r.Manifest)
		full, _ := json.Marshal(r)
		if _, err := x.Exec(ctx, q, req.IngestType, req.BaseURL, p.Updated, r.Hit, r.Status, r.PlatformName, r.PlatformDomain,
			r.PlatformID, nullable(r.IngestStrategy), r.TotalSize, r.FileCount, nullable(r.ArchiveorgItemName), nil,
			string(manifest), string(full), w.JobID, w.ItemID); err != nil {
			return fmt.Errorf("upsert fileset result %q: %w", w.Key, err)
		}
	}
	return nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Row is a row of fileset_results, as `sluice fileset results --output json` and
// GET /v1/filesets show it.
type Row struct {
	IngestType string    `json:"ingest_type"`
	BaseURL    string    `json:"base_url"`
	Status     string    `json:"status"`
	Updated    time.Time `json:"updated"`
	JobID      int64     `json:"job_id"`
	ItemID     int64     `json:"item_id"`
	Result     Result    `json:"result"`
}

const selectRow = `SELECT ingest_type, base_url, updated_at, status, job_id, item_id, result FROM fileset_results `

func scanRows(rows store.DomainRows) ([]Row, error) {
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		var updated int64
		var result []byte
		if err := rows.Scan(&r.IngestType, &r.BaseURL, &updated, &r.Status, &r.JobID, &r.ItemID, &result); err != nil {
			return nil, err
		}
		r.Updated = time.Unix(0, updated).UTC()
		if err := json.Unmarshal(result, &r.Result); err != nil {
			return nil, fmt.Errorf("fileset result of %s: %w", r.BaseURL, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Lookup returns the result stored for (ingestType, baseURL), or store.ErrNotFound.
func Lookup(ctx context.Context, x store.DomainSQL, ingestType, baseURL string) (*Row, error) {
	rows, err := x.Query(ctx, rebind(x.Dialect(), selectRow+`WHERE ingest_type = ? AND base_url = ?`), ingestType, baseURL)
	if err != nil {
		return nil, err
	}
	rs, err := scanRows(rows)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, store.ErrNotFound
	}
	return &rs[0], nil
}

// ListParams selects results: of a status (all when empty), after a (ingest_type, base_url)
// for paging, at most Limit (100 when 0).
type ListParams struct {
	Status                        string
	AfterIngestType, AfterBaseURL string
	Limit                         int
}

// List returns results in (ingest_type, base_url) order.
func List(ctx context.Context, x store.DomainSQL, p ListParams) ([]Row, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	q := selectRow + `WHERE (ingest_type > ? OR (ingest_type = ? AND base_url > ?))`
	args := []any{p.AfterIngestType, p.AfterIngestType, p.AfterBaseURL}
	if p.Status != "" {
		q += ` AND status = ?`
		args = append(args, p.Status)
	}
	q += ` ORDER BY ingest_type, base_url LIMIT ?`
	args = append(args, p.Limit)
	rows, err := x.Query(ctx, rebind(x.Dialect(), q), args...)
	if err != nil {
		return nil, err
	}
	return scanRows(rows)
}
