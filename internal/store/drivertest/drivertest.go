// Package drivertest runs tests against every store driver: the embedded SQLite store always,
// PostgreSQL when SLUICE_TEST_DATABASE_URL is set, each test in a schema of its own that is
// dropped when it ends. Without the URL the PostgreSQL subtests skip, or fail when
// SLUICE_TEST_REQUIRE_POSTGRES=1 (as in CI), so a skip there is never silent.
//
// The store conformance suite (storetest) holds the drivers to one contract query by query;
// this package lets the engine's end-to-end tests run on both drivers too.
package drivertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/postgres"
	"github.com/sluice-project/sluice/internal/store/sqlite"
)

// Open returns a new, empty, migrated store and closes it (and drops its schema) when tb ends.
// Closing it earlier is allowed.
type Open func(tb testing.TB) store.Store

// ForEach runs fn as a subtest per driver, named "sqlite" and "postgres". The subtests do not
// call t.Parallel; fn may.
func ForEach(t *testing.T, fn func(t *testing.T, open Open)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, OpenSQLite) })
	t.Run("postgres", func(t *testing.T) {
		DatabaseURL(t)
		fn(t, OpenPostgres)
	})
}

// OpenSQLite opens a SQLite store in a file under tb.TempDir().
func OpenSQLite(tb testing.TB) store.Store {
	tb.Helper()
	db, err := sqlite.Open(tb.Context(), sqlite.Config{Path: filepath.Join(tb.TempDir(), "sluice.db")})
	if err != nil {
		tb.Fatalf("open sqlite: %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// OpenPostgres opens a PostgreSQL store in a new schema of the database at
// SLUICE_TEST_DATABASE_URL, skipping tb without it (see [DatabaseURL]).
func OpenPostgres(tb testing.TB) store.Store {
	tb.Helper()
	url := DatabaseURL(tb)
	schema := Schema(tb)
	db, err := postgres.Open(tb.Context(), postgres.Config{URL: url, Schema: schema})
	if err != nil {
		tb.Fatalf("open postgres: %v", err)
	}
	tb.Cleanup(func() {
		db.Close()
		DropSchema(tb, url, schema)
	})
	return db
}

// DatabaseURL returns SLUICE_TEST_DATABASE_URL. When it is unset it skips tb, or fails it when
// SLUICE_TEST_REQUIRE_POSTGRES=1.
func DatabaseURL(tb testing.TB) string {
	tb.Helper()
	url := os.Getenv("SLUICE_TEST_DATABASE_URL")
	if url == "" {
		if os.Getenv("SLUICE_TEST_REQUIRE_POSTGRES") == "1" {
			tb.Fatal("SLUICE_TEST_DATABASE_URL is unset but SLUICE_TEST_REQUIRE_POSTGRES=1")
		}
		tb.Skip("PostgreSQL: set SLUICE_TEST_DATABASE_URL")
	}
	return url
}

// Schema returns a new random schema name, sluice_test_ and 12 hex digits.
func Schema(tb testing.TB) string {
	tb.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return "sluice_test_" + hex.EncodeToString(b)
}

// DropSchema drops the schema and everything in it.
func DropSchema(tb testing.TB, url, schema string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := postgres.DropSchema(ctx, url, schema); err != nil {
		tb.Error(err)
	}
}

// SharedPostgres returns an Open whose every call opens a new store — its own pool, as another
// process would — on one new schema of the database at SLUICE_TEST_DATABASE_URL, dropped when
// tb ends. It skips tb without the database (see [DatabaseURL]).
func SharedPostgres(tb testing.TB) Open {
	tb.Helper()
	url := DatabaseURL(tb)
	schema := Schema(tb)
	tb.Cleanup(func() { DropSchema(tb, url, schema) }) // after the stores close (cleanups run last first)
	return func(tb testing.TB) store.Store {
		tb.Helper()
		db, err := postgres.Open(tb.Context(), postgres.Config{URL: url, Schema: schema})
		if err != nil {
			tb.Fatalf("open postgres: %v", err)
		}
		tb.Cleanup(func() { db.Close() })
		return db
	}
}
