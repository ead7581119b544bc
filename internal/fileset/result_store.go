package fileset

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
)

// DomainDB is what the domain's typed store runs its statements on: a [store.Store], in
// autocommit, or a transaction's [store.Executor].
type DomainDB interface {
	DomainSQL() store.DomainSQL
}

// ResultStore is the typed store of fileset_results: the result of each request whose platform
// was identified, keyed by (ingest_type, base_url). Its statements are those of the dialect of
// the store it was made on (see resultSQL). It is safe for concurrent use.
type ResultStore struct {
	x store.DomainSQL
	q *resultQueries
}

// NewResultStore returns the results store on db.
func NewResultStore(db DomainDB) *ResultStore { return resultsOn(db.DomainSQL()) }

// Open returns the results store over the engine's store, outside any task's transaction.
func Open(e *engine.Engine) *ResultStore { return resultsOn(e.DomainSQL()) }

func resultsOn(x store.DomainSQL) *ResultStore {
	return &ResultStore{x: x, q: resultSQL[x.Dialect()]}
}

// resultQueries are the statements of fileset_results in one dialect.
type resultQueries struct {
	put, get, list, listStatus string
}

// resultSQL holds fileset_results' statements per dialect. The dialects differ only in their
// placeholders (? on SQLite, $n on PostgreSQL) and column types (manifest and result are jsonb
// on PostgreSQL, text on SQLite, both read and written as JSON text).
var resultSQL = map[store.Dialect]*resultQueries{
	store.DialectSQLite:   resultStatements(store.DialectSQLite),
	store.DialectPostgres: resultStatements(store.DialectPostgres),
}

func resultStatements(d store.Dialect) *resultQueries {
	const columns = `SELECT ingest_type, base_url, updated_at, status, job_id, item_id, result FROM fileset_results `
	const after = `WHERE (ingest_type > ? OR (ingest_type = ? AND base_url > ?))`
	return &resultQueries{
		// A later result wins; the same write replayed changes nothing.
		put: store.Rebind(d, `INSERT INTO fileset_results (ingest_type, base_url, updated_at, hit, status, platform_name,
	platform_domain, platform_id, ingest_strategy, total_size, file_count, archiveorg_item_name, web_bundle_url, manifest,
	result, job_id, item_id)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (ingest_type, base_url) DO UPDATE SET updated_at = excluded.updated_at, hit = excluded.hit,
	status = excluded.status, platform_name = excluded.platform_name, platform_domain = excluded.platform_domain,
	platform_id = excluded.platform_id, ingest_strategy = excluded.ingest_strategy, total_size = excluded.total_size,
	file_count = excluded.file_count, archiveorg_item_name = excluded.archiveorg_item_name,
	web_bundle_url = excluded.web_bundle_url, manifest = excluded.manifest, result = excluded.result,
	job_id = excluded.job_id, item_id = excluded.item_id
	WHERE fileset_results.updated_at <= excluded.updated_at`),
		get:        store.Rebind(d, columns+`WHERE ingest_type = ? AND base_url = ?`),
		list:       store.Rebind(d, columns+after+` ORDER BY ingest_type, base_url LIMIT ?`),
		listStatus: store.Rebind(d, columns+after+` AND status = ? ORDER BY ingest_type, base_url LIMIT ?`),
	}
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

// PutParams is a result to store: made by the task (JobID, ItemID) at Updated.
type PutParams struct {
	Result        Result
	Updated       int64 // Unix nanoseconds
	JobID, ItemID int64
}

// Put stores a result under its request's (ingest_type, base_url), unless a result stored there
// is later than p.Updated. It returns an error when the result has no platform or its request
// no base_url or ingest_type.
func (s *ResultStore) Put(ctx context.Context, p PutParams) error {
	r := p.Result
	var req Request
	_ = json.Unmarshal(r.Request, &req)
	if r.PlatformName == "" || req.BaseURL == "" || req.IngestType == "" {
		return fmt.Errorf("fileset result: no platform, base_url or ingest_type")
	}
	manifest, _ := json.Marshal(r.Manifest)
	full, _ := json.Marshal(r)
	_, err := s.x.Exec(ctx, s.q.put, req.IngestType, req.BaseURL, p.Updated, r.Hit, r.Status, r.PlatformName, r.PlatformDomain,
		r.PlatformID, nullable(r.IngestStrategy), r.TotalSize, r.FileCount, nullable(r.ArchiveorgItemName), nil,
		string(manifest), string(full), p.JobID, p.ItemID)
	return err
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Get returns the result stored for (ingestType, baseURL), or [store.ErrNotFound].
func (s *ResultStore) Get(ctx context.Context, ingestType, baseURL string) (*Row, error) {
	rs, err := s.query(ctx, s.q.get, ingestType, baseURL)
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
func (s *ResultStore) List(ctx context.Context, p ListParams) ([]Row, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	if p.Status == "" {
		return s.query(ctx, s.q.list, p.AfterIngestType, p.AfterIngestType, p.AfterBaseURL, p.Limit)
	}
	return s.query(ctx, s.q.listStatus, p.AfterIngestType, p.AfterIngestType, p.AfterBaseURL, p.Status, p.Limit)
}

func (s *ResultStore) query(ctx context.Context, q string, args ...any) ([]Row, error) {
	rows, err := s.x.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read fileset_results: %w", err)
	}
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
