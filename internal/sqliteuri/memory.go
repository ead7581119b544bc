package sqliteuri

import (
	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// MemoryBudget is the memory SQLite keeps, over every connection and database of the process,
// before it reuses its page caches' least recently used pages instead of allocating more: a
// soft limit (sqlite3_soft_heap_limit64), so no query ever fails for it.
//
// Without it a process's SQLite memory grew with its databases. The driver builds SQLite with
// SQLITE_ENABLE_MEMORY_MANAGEMENT, so every connection's page cache is one pool: each
// connection's cache_size only adds its share to the pool's page count, and a busy connection
// takes the oldest pages of idle ones. The pool is counted in pages, not bytes, and its
// allocator gives a page of 16 KiB (the blob store's) a 64 KiB block, a page of 4 KiB an
// 8 KiB slot: as the blob store's file grew, its pages displaced the task store's, and the
// memory SQLite's allocator held in an ingest went from 60 MB at 20,000 files to 121 MB at
// 100,000 (about 148 MB at a million), with the same cache_size everywhere. Counted in bytes,
// the pool stops where the budget says.
//
// 24 MiB holds the task store writer's 8 MB cache (16 MB in the allocator's slots), the
// readers' and the blob store's; the statements, schemas and search-index merges of a busy node
// (highest seen at 20,000 files: 26 MB) may take it past the budget, which only makes the caches
// give pages back. At 32 MiB an ingest of 1 KB files reached the budget only after 20,000 files,
// and RSS grew with it (166 MB at 20,000 files, 182 MB at 100,000); at 24 MiB the budget is
// reached early and RSS stays (166 / 169 MB) at the same documents a second. 16 MiB saved 10 MB
// more and cost 7 % of them (docs/performance.md, session 23).
const MemoryBudget = 24 << 20

// The budget needs SQLite's memory statistics, which the driver builds off
// (SQLITE_DEFAULT_MEMSTATUS=0) and which can only be turned on before SQLite initializes, that
// is before the process opens its first connection: so here, when the package every SQLite
// database of Sluice is opened through is initialized.
func init() {
	tls := libc.NewTLS()
	defer tls.Close()
	va := libc.NewVaList(int32(1))
	defer libc.Xfree(tls, va)
	if rc := sqlite3.Xsqlite3_config(tls, sqlite3.SQLITE_CONFIG_MEMSTATUS, va); rc != sqlite3.SQLITE_OK {
		// SQLite was initialized before this package (a connection opened from another
		// package's init): the budget can't be kept, and nothing else changes.
		return
	}
	sqlite3.Xsqlite3_soft_heap_limit64(tls, MemoryBudget)
}

// MemoryUsed returns the bytes SQLite holds now, over every connection of the process, and the
// most it has held since the process started.
func MemoryUsed() (now, peak int64) {
	tls := libc.NewTLS()
	defer tls.Close()
	return sqlite3.Xsqlite3_memory_used(tls), sqlite3.Xsqlite3_memory_highwater(tls, 0)
}
