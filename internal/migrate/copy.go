// Package migrate moves an embedded installation (a data dir: SQLite and a blob directory) to
// the scaled-out one (PostgreSQL and, usually, S3): `sluice migrate copy`. The drivers do the
// dialect work — [sqlite.DB.Export] reads every table in one snapshot, [postgres.DB.Import]
// writes them with COPY in one transaction and converts each value to its column's type — and
// [blob.Copy] moves the blobs; this package orders the steps, holds the data dir's lock and
// reports progress.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sluice-project/sluice/internal/audit"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/docsearch"
	"github.com/sluice-project/sluice/internal/fileset"
	"github.com/sluice-project/sluice/internal/fleet"
	"github.com/sluice-project/sluice/internal/graph"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/outbox"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/postgres"
	"github.com/sluice-project/sluice/internal/store/sqlite"
	"github.com/sluice-project/sluice/internal/watch"
)

// Config configures [Copy].
type Config struct {
	// DataDir is the embedded installation to copy from. Required.
	DataDir string
	// To is the target store: a migrated schema with no rows. Required.
	To *postgres.DB
	// Blobs is the target blob store. Nil leaves the blobs in the data dir, where a node opened
	// with this data dir and the target database still finds them (one machine); several
	// machines need a shared store (S3). Defaults to nil.
	Blobs blob.Store
	// Parallel is how many blobs are copied at once. Defaults to 4.
	Parallel int
	// Out receives progress lines and the summary. Defaults to io.Discard.
	Out io.Writer
	// ProgressEvery is how often a progress line is printed while blobs are copied. Defaults to 5s.
	ProgressEvery time.Duration
}

// Summary is what [Copy] did.
type Summary struct {
	// Tables lists the rows copied per table, in the order copied.
	Tables []TableCount
	Rows   int64
	// RowsTook is the time of the database copy (one transaction, commit included).
	RowsTook time.Duration
	Blobs    blob.CopyStats
	// BlobsTook is the time of the blob copy; zero when the blobs stayed in the data dir.
	BlobsTook time.Duration
}

// TableCount is the number of rows copied from one table.
type TableCount struct {
	Table string
	Rows  int64
}

// Copy copies the installation in cfg.DataDir to cfg.To and cfg.Blobs: first every blob the
// target lacks (verified by hash; re-running skips those already there), then every row of
// every table, ids preserved, in one transaction. It holds the data dir's lock throughout, so
// it fails with an error wrapping [node.ErrLocked] while an engine runs there, and no engine
// starts there meanwhile. It fails before copying anything when the target already has rows.
// The data dir is only read; after the copy Copy writes [node.MigratedFile] into it, so that
// sluice refuses to open the stale embedded database (delete the file to go back).
func Copy(ctx context.Context, cfg Config) (*Summary, error) {
	if cfg.DataDir == "" || cfg.To == nil {
		return nil, errors.New("migrate copy: a data dir and a target database are required")
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = 5 * time.Second
	}
	dbPath := filepath.Join(cfg.DataDir, node.DatabaseFile)
	if _, err := os.Stat(dbPath); err != nil {
		return nil, fmt.Errorf("no embedded installation in %s: %w", cfg.DataDir, err)
	}
	lock, err := node.LockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := cfg.To.ImportCheck(ctx); err != nil {
		return nil, notEmpty(err)
	}
	from, err := sqlite.Open(ctx, sqlite.Config{Path: dbPath})
	if err != nil {
		return nil, err
	}
	defer from.Close()

	sum := &Summary{}
	blobDir := filepath.Join(cfg.DataDir, node.BlobsDir)
	if cfg.Blobs == nil {
		fmt.Fprintf(cfg.Out, "blobs: not copied; they stay in %s (start nodes with --data %s, or pass --blobs to copy them)\n", blobDir, cfg.DataDir)
	} else {
		src, err := blob.OpenDir(blobDir, blob.DirOptions{SmallMax: blob.DefaultSmallMax})
		if err != nil {
			return nil, err
		}
		defer src.Close()
		start := time.Now()
		last := start
		sum.Blobs, err = blob.Copy(ctx, cfg.Blobs, src, blob.CopyOptions{Parallel: cfg.Parallel, Progress: func(s blob.CopyStats) {
			if time.Since(last) >= cfg.ProgressEvery {
				last = time.Now()
				fmt.Fprintf(cfg.Out, "blobs: %d copied (%s), %d already there…\n", s.Copied, humanBytes(s.Bytes), s.Skipped)
			}
		}})
		sum.BlobsTook = time.Since(start)
		if err != nil {
			return sum, err
		}
		s := sum.Blobs
		fmt.Fprintf(cfg.Out, "blobs: %d copied (%s) in %s, %d already there (%s)\n",
			s.Copied, humanBytes(s.Bytes), sum.BlobsTook.Round(time.Millisecond), s.Skipped, humanBytes(s.SkippedBytes))
	}

	start := time.Now()
	err = cfg.To.Import(ctx, func(imp *postgres.Importer) error {
		// The outbox's tables (a domain every node registers) are created in the target
		// as the source has them, to receive its rows: pending messages keep their ids.
		if !imp.HasTable("outbox_messages") && hasDomain(ctx, from, outbox.DomainName) {
			if err := imp.CreateDomain(ctx, outbox.Migrations(store.DialectPostgres)); err != nil {
				return err
			}
		}
		// So are the built-in workflows' domains' (every node registers them too).
		for _, d := range []struct {
			name, table string
			migrations  func(store.Dialect) []store.DomainMigration
		}{
			{objects.Name, "objects_sheets", objects.Domain{}.Migrations},
			{graph.DomainName, "graph_versions", graph.Domain{}.Migrations},
			{fileset.DomainName, "ingest_fileset_platform", fileset.Domain{}.Migrations},
			{fleet.DomainName, "fleet_members", fleet.Migrations}, // rows go stale and are forgotten
			{audit.DomainName, "audit_events", audit.Migrations},
			{watch.DomainName, "watch_cursors", watch.Migrations},
		} {
			if imp.HasTable(d.table) || !hasDomain(ctx, from, d.name) {
				continue
			}
			if err := imp.CreateDomain(ctx, d.migrations(store.DialectPostgres)); err != nil {
				return err
			}
		}
		err := from.Export(ctx, func(t *sqlite.ExportTable) error {
			tstart := time.Now()
			n, err := imp.Table(ctx, t.Name, t.Columns, t)
			if err != nil {
				return err
			}
			sum.Tables = append(sum.Tables, TableCount{Table: t.Name, Rows: n})
			sum.Rows += n
			fmt.Fprintf(cfg.Out, "rows: %-10s %9d  %s\n", t.Name, n, time.Since(tstart).Round(time.Millisecond))
			return nil
		})
		if err != nil || !imp.HasTable("search_index") {
			return err
		}
		// The full-text index is rebuilt, not copied (SQLite's is an FTS5 table).
		if err := docsearch.AddAllMissing(ctx, imp.DomainSQL()); err != nil {
			return fmt.Errorf("import: index the documents: %w", err)
		}
		return nil
	})
	sum.RowsTook = time.Since(start)
	if err != nil {
		return sum, fmt.Errorf("copy rows (nothing was committed): %w", notEmpty(err))
	}
	fmt.Fprintf(cfg.Out, "rows: %d in %d tables copied and committed in %s\n", sum.Rows, len(sum.Tables), sum.RowsTook.Round(time.Millisecond))
	marker := filepath.Join(cfg.DataDir, node.MigratedFile)
	note := fmt.Sprintf("This data dir was copied to PostgreSQL (schema %q) by `sluice migrate copy` at %s.\n"+
		"Its embedded database (%s) is stale: sluice refuses to open it without --database.\n"+
		"Delete this file to use it as an embedded installation again (`sluice migrate copy` reads it either way).\n",
		cfg.To.Schema(), time.Now().UTC().Format(time.RFC3339), node.DatabaseFile)
	if err := os.WriteFile(marker, []byte(note), 0o644); err != nil {
		return sum, fmt.Errorf("rows and blobs are copied, but marking the data dir failed (do not run it as an embedded installation any more): %w", err)
	}
	fmt.Fprintf(cfg.Out, "marked %s as copied (%s)\n", cfg.DataDir, marker)
	return sum, nil
}

// notEmpty words the driver's not-empty error for the operator.
func notEmpty(err error) error {
	var ne *postgres.NotEmptyError
	if errors.As(err, &ne) {
		return fmt.Errorf("target database already has %s; migrate copy needs an empty one", ne.Has)
	}
	return err
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// hasDomain reports whether the store has applied a migration of the domain.
func hasDomain(ctx context.Context, db store.Store, domain string) bool {
	rows, err := db.DomainSQL().Query(ctx, `SELECT count(*) FROM domain_migrations WHERE domain = ?`, domain)
	if err != nil {
		return false
	}
	defer rows.Close()
	var n int
	if rows.Next() {
		_ = rows.Scan(&n)
	}
	return n > 0
}
