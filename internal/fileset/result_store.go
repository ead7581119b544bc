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

// ResultStore is the typed store of ingest_fileset_platform (the design's table) and, beside
// each row, ingest_fileset_platform_result (the whole result and the task that wrote it): the
// result of each request whose platform was identified, keyed by (ingest_type, base_url). Its
// statements are those of the dialect of the store it was made on (see resultSQL). It is safe
// for concurrent use.
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

// resultQueries are the statements of the results in one dialect.
type resultQueries struct {
	put, putResult, get, list, listStatus string
	putCDX, getCDX                        string
	deleteItem, putItemFile, itemFiles    string
	blobRef, putWARC                      string
	dialect                               store.Dialect
}

// resultSQL holds the results' statements per dialect. The dialects differ in their placeholders
// (? on SQLite, $n on PostgreSQL) and column types: updated is timestamptz on PostgreSQL and ISO
// 8601 text on SQLite ([updatedText]); manifest and result are jsonb on PostgreSQL, text on
// SQLite, both read and written as JSON text.
var resultSQL = map[store.Dialect]*resultQueries{
	store.DialectSQLite:   resultStatements(store.DialectSQLite),
	store.DialectPostgres: resultStatements(store.DialectPostgres),
}

func resultStatements(d store.Dialect) *resultQueries {
	const columns = `SELECT p.ingest_type, p.base_url, p.updated, p.status, r.job_id, r.item_id, r.result
	FROM ingest_fileset_platform p JOIN ingest_fileset_platform_result r ON r.ingest_type = p.ingest_type AND r.base_url = p.base_url `
	const after = `WHERE (p.ingest_type > ? OR (p.ingest_type = ? AND p.base_url > ?))`
	return &resultQueries{
		dialect: d,
		// A later result wins; the same write replayed changes nothing. It changes a row only
		// when this write is the row's, and then its whole result goes beside it (putResult).
		put: store.Rebind(d, `INSERT INTO ingest_fileset_platform (ingest_type, base_url, updated, hit, status, platform_name,
	platform_domain, platform_id, ingest_strategy, total_size, file_count, archiveorg_item_name,
	archiveorg_item_bundle_path, web_bundle_url, web_bundle_dt, manifest)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (ingest_type, base_url) DO UPDATE SET updated = excluded.updated, hit = excluded.hit,
	status = excluded.status, platform_name = excluded.platform_name, platform_domain = excluded.platform_domain,
	platform_id = excluded.platform_id, ingest_strategy = excluded.ingest_strategy, total_size = excluded.total_size,
	file_count = excluded.file_count, archiveorg_item_name = excluded.archiveorg_item_name,
	archiveorg_item_bundle_path = excluded.archiveorg_item_bundle_path, web_bundle_url = excluded.web_bundle_url,
	web_bundle_dt = excluded.web_bundle_dt, manifest = excluded.manifest
	WHERE ingest_fileset_platform.updated <= excluded.updated`),
		putResult: store.Rebind(d, `INSERT INTO ingest_fileset_platform_result (ingest_type, base_url, result, job_id, item_id)
	VALUES (?, ?, ?, ?, ?)
	ON CONFLICT (ingest_type, base_url) DO UPDATE SET result = excluded.result, job_id = excluded.job_id, item_id = excluded.item_id`),
		// A capture's line is written once; a replay changes nothing.
		putCDX: store.Rebind(d, `INSERT INTO fileset_cdx (url, sha1hex, datetime, surt, mimetype, status_code, sha1b32,
	warc_csize, warc_offset, warc_path) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`),
		getCDX: store.Rebind(d, `SELECT url, sha1hex, datetime, surt, mimetype, status_code, sha1b32, warc_csize, warc_offset,
	warc_path FROM fileset_cdx WHERE url = ? AND sha1hex = ? ORDER BY datetime DESC LIMIT 1`),
		// An item folder is written whole: its earlier files' rows go first.
		deleteItem: store.Rebind(d, `DELETE FROM fileset_archiveorg_item WHERE item_name = ?`),
		putItemFile: store.Rebind(d, `INSERT INTO fileset_archiveorg_item (item_name, name, sha256, size, source, format)
	VALUES (?, ?, ?, ?, ?, ?)`),
		itemFiles: store.Rebind(d, `SELECT name, sha256, size, source, format FROM fileset_archiveorg_item WHERE item_name = ?
	ORDER BY name`),
		blobRef: store.Rebind(d, `SELECT 1 WHERE EXISTS (SELECT 1 FROM fileset_archiveorg_item WHERE sha256 = ?)
	OR EXISTS (SELECT 1 FROM fileset_warc WHERE warc_path = ?)`),
		putWARC:    store.Rebind(d, `INSERT INTO fileset_warc (warc_path) VALUES (?) ON CONFLICT DO NOTHING`),
		get:        store.Rebind(d, columns+`WHERE p.ingest_type = ? AND p.base_url = ?`),
		list:       store.Rebind(d, columns+after+` ORDER BY p.ingest_type, p.base_url LIMIT ?`),
		listStatus: store.Rebind(d, columns+after+` AND p.status = ? ORDER BY p.ingest_type, p.base_url LIMIT ?`),
	}
}

// updatedText is updated's form on SQLite: UTC, microseconds (PostgreSQL's precision), fixed
// width, so that text order is time order.
const updatedText = "2006-01-02T15:04:05.000000Z"

// updatedArg is t as the dialect's updated column takes it.
func (q *resultQueries) updatedArg(t time.Time) any {
	t = t.UTC().Truncate(time.Microsecond)
	if q.dialect == store.DialectSQLite {
		return t.Format(updatedText)
	}
	return t
}

// scanUpdated reads updated as either dialect gives it.
func scanUpdated(v any) (time.Time, error) {
	switch v := v.(type) {
	case time.Time:
		return v.UTC(), nil
	case string:
		return time.Parse(time.RFC3339Nano, v)
	case []byte:
		return time.Parse(time.RFC3339Nano, string(v))
	}
	return time.Time{}, fmt.Errorf("updated: %T %v", v, v)
}

// Row is a result stored, as `sluice fileset results --output json` and
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
	Updated       time.Time // kept to the microsecond
	JobID, ItemID int64
	// Folder is the archive.org item an archiveorg-* strategy wrote, stored with its result.
	Folder *ItemFolder
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
	if r.PlatformDomain == "" || r.PlatformID == "" {
		return fmt.Errorf("fileset result of %s: no platform_domain or platform_id", req.BaseURL)
	}
	var manifest any
	if r.Manifest != nil {
		b, _ := json.Marshal(r.Manifest)
		manifest = string(b)
	}
	full, _ := json.Marshal(r)
	// A bundled strategy's bundle: its path in the item (archiveorg), or its capture's URL and
	// time (web).
	var bundlePath, bundleURL, bundleDT any
	if b := r.FilesetBundle; b != nil {
		bundlePath = nullable(b.ArchiveorgBundlePath)
		if b.CDX != nil {
			bundleURL, bundleDT = nullable(b.CDX.URL), nullable(b.CDX.Datetime)
		}
	}
	n, err := s.x.Exec(ctx, s.q.put, req.IngestType, req.BaseURL, s.q.updatedArg(p.Updated), r.Hit, nullable(r.Status),
		r.PlatformName, r.PlatformDomain, r.PlatformID, nullable(r.IngestStrategy), r.TotalSize, r.FileCount,
		nullable(r.ArchiveorgItemName), bundlePath, bundleURL, bundleDT, manifest)
	if err != nil || n == 0 {
		return err
	}
	if _, err = s.x.Exec(ctx, s.q.putResult, req.IngestType, req.BaseURL, string(full), p.JobID, p.ItemID); err != nil {
		return err
	}
	if p.Folder != nil {
		return s.putItem(ctx, *p.Folder)
	}
	return nil
}

// putItem stores an item folder's files, replacing the item's earlier ones.
func (s *ResultStore) putItem(ctx context.Context, f ItemFolder) error {
	if f.Name == "" {
		return fmt.Errorf("archive.org item folder: no item name")
	}
	if _, err := s.x.Exec(ctx, s.q.deleteItem, f.Name); err != nil {
		return fmt.Errorf("archive.org item %s: %w", f.Name, err)
	}
	for _, file := range f.Files {
		if _, err := s.x.Exec(ctx, s.q.putItemFile, f.Name, file.Name, file.SHA256, file.Size, file.Source, nullable(file.Format)); err != nil {
			return fmt.Errorf("archive.org item %s, file %s: %w", f.Name, file.Name, err)
		}
	}
	return nil
}

// ItemFiles returns the files of the archive.org item folder name, by name; none when no
// archiveorg-* strategy wrote it.
func (s *ResultStore) ItemFiles(ctx context.Context, name string) ([]ItemFile, error) {
	rows, err := s.x.Query(ctx, s.q.itemFiles, name)
	if err != nil {
		return nil, fmt.Errorf("read fileset_archiveorg_item: %w", err)
	}
	defer rows.Close()
	var out []ItemFile
	for rows.Next() {
		var f ItemFile
		var format *string
		if err := rows.Scan(&f.Name, &f.SHA256, &f.Size, &f.Source, &format); err != nil {
			return nil, err
		}
		if format != nil {
			f.Format = *format
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// BlobReferenced reports whether an item folder names the blob or it is a capture's WARC.
func (s *ResultStore) BlobReferenced(ctx context.Context, sha256 string) (bool, error) {
	rows, err := s.x.Query(ctx, s.q.blobRef, sha256, sha256)
	if err != nil {
		return false, fmt.Errorf("read fileset_archiveorg_item and fileset_warc: %w", err)
	}
	defer rows.Close()
	found := rows.Next()
	return found, rows.Err()
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
		return nil, fmt.Errorf("read ingest_fileset_platform: %w", err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		var updated any
		var status *string
		var result []byte
		if err := rows.Scan(&r.IngestType, &r.BaseURL, &updated, &status, &r.JobID, &r.ItemID, &result); err != nil {
			return nil, err
		}
		if status != nil {
			r.Status = *status
		}
		var err error
		if r.Updated, err = scanUpdated(updated); err != nil {
			return nil, fmt.Errorf("fileset result of %s: %w", r.BaseURL, err)
		}
		if err := json.Unmarshal(result, &r.Result); err != nil {
			return nil, fmt.Errorf("fileset result of %s: %w", r.BaseURL, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// PutCDX adds a capture's line to the CDX index (unless the index has a line of the same URL,
// payload and second), and its WARC to the WARCs the blob collector keeps.
func (s *ResultStore) PutCDX(ctx context.Context, c CDX) error {
	if _, err := s.x.Exec(ctx, s.q.putCDX, c.URL, c.SHA1Hex, c.Datetime, c.SURT, c.Mimetype, c.StatusCode, c.SHA1B32,
		c.WarcCSize, c.WarcOffset, c.WarcPath); err != nil {
		return err
	}
	_, err := s.x.Exec(ctx, s.q.putWARC, c.WarcPath)
	return err
}

// CDX returns the latest capture of url whose payload has the sha1, or [store.ErrNotFound].
func (s *ResultStore) CDX(ctx context.Context, url, sha1hex string) (*CDX, error) {
	rows, err := s.x.Query(ctx, s.q.getCDX, url, sha1hex)
	if err != nil {
		return nil, fmt.Errorf("read fileset_cdx: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, store.ErrNotFound
	}
	var c CDX
	if err := rows.Scan(&c.URL, &c.SHA1Hex, &c.Datetime, &c.SURT, &c.Mimetype, &c.StatusCode, &c.SHA1B32, &c.WarcCSize,
		&c.WarcOffset, &c.WarcPath); err != nil {
		return nil, err
	}
	return &c, nil
}
