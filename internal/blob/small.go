package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver, as the embedded store uses

	"github.com/sluice-project/sluice/internal/deflate"
	"github.com/sluice-project/sluice/internal/sqliteuri"
)

// smallDB keeps a [Dir]'s small blobs as rows of one SQLite database (root/small.db) instead of
// one file each. A file blob costs two fsyncs (the file, then its directory) and an inode; a
// document of a few kilobytes makes three or four blobs (the entry, its PDF, its thumbnail), so
// for small inputs those fsyncs, not the conversions, set the pace. Rows written by concurrent
// Puts share one transaction and one fsync of the write-ahead log (synchronous=FULL: a Put that
// returns is durable, power loss included), the same group commit the engine's database uses.
// SQLite's own measurements find blobs under ~100 KB faster to read from a database than from
// files, too.
//
// A row's data is the blob deflated when that saves at least an eighth of it (text, JSON, an
// uncompressed image), and the blob itself otherwise (a PDF or PNG, already compressed); its
// size is always the blob's own, so a row whose data is shorter than its size is deflated. The
// key stays the SHA-256 of the blob's bytes, so deduplication, exports and every reader see
// the same bytes as before; rows written before compression are simply rows that saved nothing.
type smallDB struct {
	max  int
	w, r *sql.DB
	reqs chan smallPut
	ins  *sql.Stmt // the insert, prepared by the first write (only the loop uses it)
	stop chan struct{}
	done sync.WaitGroup

	// recent keeps the blobs staged last as to be read soon, up to recentMax bytes: the steps
	// after the one that wrote a blob (detect, then a converter, on each entry an unpack made)
	// read it back; a final child's PDF and thumbnails are not kept.
	mu          sync.Mutex
	recent      map[string][]byte
	recentOrder []string
	recentBytes int
}

// recentMax bounds the bytes of [smallDB.recent].
const recentMax = 8 << 20

func (s *smallDB) remember(key string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.recent[key]; ok {
		return
	}
	s.recent[key] = data
	s.recentOrder = append(s.recentOrder, key)
	s.recentBytes += cap(data)
	for s.recentBytes > recentMax && len(s.recentOrder) > 0 {
		old := s.recentOrder[0]
		s.recentOrder = s.recentOrder[1:]
		s.recentBytes -= cap(s.recent[old])
		delete(s.recent, old)
	}
}

func (s *smallDB) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if data, ok := s.recent[key]; ok {
		s.recentBytes -= cap(data)
		delete(s.recent, key)
		s.recentOrder = slices.DeleteFunc(s.recentOrder, func(k string) bool { return k == key })
	}
}

type smallPut struct {
	key    string
	data   []byte // the blob
	stored []byte // what its row keeps: see packSmall
	now    time.Time
	soon   bool // read back shortly: keep it in recent
	err    chan error
}

// smallSchema keeps the blobs in a rowid table with a unique key: its leaves hold whole rows,
// where a WITHOUT ROWID table (session 2's layout, which older files keep; the statements suit
// both) rebalances a tree of rows of kilobytes — 30 % more CPU per Put, measured. The key is
// the SHA-256's 32 bytes, not its 64 hex characters: the key is in the row and again in the
// unique index, and a text document makes three blobs. Files written before keep the column
// declared TEXT; [convertSmallKeys] turns their keys into bytes when they are opened.
const smallSchema = `CREATE TABLE IF NOT EXISTS blobs (
	sha256 BLOB NOT NULL UNIQUE, -- the SHA-256's 32 bytes
	size INTEGER NOT NULL,
	mtime INTEGER NOT NULL, -- unix microseconds, refreshed by every Put (GC's grace period)
	data BLOB NOT NULL
)`

func openSmall(path string, max int) (*smallDB, error) {
	if err := createSmall(path); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_txlock", "immediate")
	dsn := sqliteuri.File(path, q)
	// Small page caches (SQLite's default is 2 MB a connection, each taking about twice that
	// in RSS): rows are written once and read back soon, mostly from recent.
	w, err := sql.Open("sqlite", dsn+"&_pragma=cache_size(-1000)")
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	if _, err := w.Exec(smallSchema); err != nil {
		w.Close()
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	if err := convertSmallKeys(w); err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", dsn+"&_pragma=query_only(1)&_pragma=cache_size(-500)")
	if err != nil {
		w.Close()
		return nil, err
	}
	r.SetMaxOpenConns(4)
	// All four kept open: with database/sql's default of two idle, an ingest of 100,000 files
	// opened and closed 4,100 connections, each parsing the schema again.
	r.SetMaxIdleConns(4)
	s := &smallDB{max: max, w: w, r: r, recent: map[string][]byte{}, reqs: make(chan smallPut, 256), stop: make(chan struct{})}
	s.done.Add(1)
	go s.loop()
	return s, nil
}

// createSmall makes the database file with 16 KiB pages if there is none (a file made earlier
// keeps its own). Appended rows of 0.5 to 3 KB — a text document's entry, PDF and thumbnail —
// left 45 % of 4 KiB pages unused (measured with dbstat): a row that does not fit begins a new
// page, and a larger page wastes about as much on four times the rows. The page size must be
// set before the first table or the switch to WAL, which the driver's pragmas of openSmall's
// connections make first (it runs them in alphabetical order), so it is made here apart.
func createSmall(path string) error {
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "page_size(16384)")
	db, err := sql.Open("sqlite", sqliteuri.File(path, q))
	if err != nil {
		return err
	}
	_, err = db.Exec(smallSchema)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return nil
}

// convertSmallKeys rewrites the keys that a file written before keys were bytes holds as hex
// text, a thousand rows a transaction: a run stopped part way leaves rows of both kinds, every
// one whole, and the next open goes on. SQLite orders every text value before every blob, so
// the rows left to convert are the first of the key's index, below the empty blob X”.
func convertSmallKeys(w *sql.DB) error {
	for {
		n, err := convertSmallKeyBatch(w)
		if err != nil || n == 0 {
			return err
		}
	}
}

func convertSmallKeyBatch(w *sql.DB) (int, error) {
	tx, err := w.Begin()
	if err != nil {
		return 0, fmt.Errorf("convert small blob keys: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.Query(`SELECT sha256 FROM blobs WHERE sha256 < X'' ORDER BY sha256 LIMIT 1000`)
	if err != nil {
		return 0, fmt.Errorf("convert small blob keys: %w", err)
	}
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return 0, fmt.Errorf("convert small blob keys: %w", err)
		}
		keys = append(keys, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("convert small blob keys: %w", err)
	}
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return 0, fmt.Errorf("convert small blob keys: a row's key is not a blob name: %w", err)
		}
		if _, err := tx.Exec(`UPDATE blobs SET sha256 = ? WHERE sha256 = ?`, keyBytes(k), k); err != nil {
			return 0, fmt.Errorf("convert small blob key %s: %w", k, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("convert small blob keys: %w", err)
	}
	return len(keys), nil
}

// keyBytes returns the 32 bytes of a valid key, as small.db keeps it.
func keyBytes(key string) []byte {
	b, _ := hex.DecodeString(key)
	return b
}

func (s *smallDB) close() error {
	close(s.stop)
	s.done.Wait()
	return errors.Join(s.w.Close(), s.r.Close())
}

// put stores data under key and returns once it is durable.
func (s *smallDB) put(ctx context.Context, key string, data []byte) error {
	wait, err := s.stage(ctx, key, data, false)
	if err != nil {
		return err
	}
	return wait()
}

var errSmallClosed = errors.New("blob store closed")

// stage queues data under key for the next transaction (blocking while the queue is full) and
// returns a function that waits until it is durable.
func (s *smallDB) stage(ctx context.Context, key string, data []byte, soon bool) (func() error, error) {
	// Deflated here, by the writer's goroutine, not by the loop that commits for everyone.
	p := smallPut{key: key, data: data, stored: packSmall(data), now: time.Now(), soon: soon, err: make(chan error, 1)}
	select {
	case s.reqs <- p:
	case <-s.stop:
		return nil, errSmallClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return func() error {
		select {
		case err := <-p.err:
			return err
		case <-s.stop:
			// The loop answers what it took before stopping; what it did not take is lost.
			select {
			case err := <-p.err:
				return err
			default:
				return errSmallClosed
			}
		case <-ctx.Done():
			// The row may still be written: harmless, GC removes it if nothing refers to it.
			return ctx.Err()
		}
	}, nil
}

// loop writes the queued rows, as many as are waiting in one transaction.
func (s *smallDB) loop() {
	defer s.done.Done()
	batch := make([]smallPut, 0, 64)
	for {
		select {
		case p := <-s.reqs:
			batch = append(batch[:0], p)
		case <-s.stop:
			return
		}
	fill:
		for len(batch) < cap(batch) {
			select {
			case p := <-s.reqs:
				batch = append(batch, p)
			default:
				break fill
			}
		}
		err := s.write(batch)
		for _, p := range batch {
			if err == nil && p.soon {
				s.remember(p.key, p.data)
			}
			p.err <- err
		}
	}
}

func (s *smallDB) write(batch []smallPut) error {
	if s.ins == nil {
		// Prepared once (before the transaction takes the writer's only connection); each
		// transaction uses it through tx.Stmt.
		put, err := s.w.Prepare(`INSERT INTO blobs (sha256, size, data, mtime) VALUES (?, ?, ?, ?)
		ON CONFLICT (sha256) DO UPDATE SET mtime = excluded.mtime`)
		if err != nil {
			return fmt.Errorf("write small blobs: %w", err)
		}
		s.ins = put
	}
	tx, err := s.w.Begin()
	if err != nil {
		return fmt.Errorf("write small blobs: %w", err)
	}
	defer tx.Rollback()
	st := tx.Stmt(s.ins)
	defer st.Close()
	for _, p := range batch {
		if _, err := st.Exec(keyBytes(p.key), len(p.data), p.stored, p.now.UnixMicro()); err != nil {
			return fmt.Errorf("write small blob %s: %w", p.key, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("write small blobs: %w", err)
	}
	return nil
}

// get returns the blob's bytes, or an error wrapping fs.ErrNotExist.
func (s *smallDB) get(ctx context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	data, ok := s.recent[key]
	s.mu.Unlock()
	if ok {
		return data, nil
	}
	var size int64
	err := s.r.QueryRowContext(ctx, `SELECT size, data FROM blobs WHERE sha256 = ?`, keyBytes(key)).Scan(&size, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fs.ErrNotExist
	}
	if err != nil {
		return nil, err
	}
	return unpackSmall(key, data, size)
}

// packSmall returns what a row keeps of data: data deflated if that saves an eighth, else data.
// A blob in a compressed format is kept as it is without trying.
func packSmall(data []byte) []byte {
	if compressed(data) {
		return data
	}
	if z, ok := deflate.Shrink(data); ok {
		return z
	}
	return data
}

// compressedMagic are the first bytes of formats whose bytes are compressed already: PNG,
// JPEG, GIF, WebP and other RIFF, PDF (its streams), zip (and OOXML, ODF, EPUB), gzip, zstd, xz,
// bzip2, 7z. Trying to deflate the PDF and the thumbnail of every document took most of the
// time spent deflating, to save nothing.
var compressedMagic = []string{"\x89PNG", "\xff\xd8\xff", "GIF8", "RIFF", "%PDF", "PK\x03\x04", "\x1f\x8b", "\x28\xb5\x2f\xfd", "\xfd7zXZ", "BZh", "7z\xbc\xaf"}

func compressed(data []byte) bool {
	for _, m := range compressedMagic {
		if bytes.HasPrefix(data, []byte(m)) {
			return true
		}
	}
	return false
}

// unpackSmall returns the blob that a row of the given size keeps as stored.
func unpackSmall(key string, stored []byte, size int64) ([]byte, error) {
	if int64(len(stored)) == size {
		return stored, nil
	}
	data, err := deflate.Inflate(stored, size)
	if err != nil {
		return nil, fmt.Errorf("small blob %s: %w", key, err)
	}
	return data, nil
}

// stat returns the blob's size and modification time, or an error wrapping fs.ErrNotExist.
func (s *smallDB) stat(ctx context.Context, key string) (int64, time.Time, error) {
	var size, mtime int64
	err := s.r.QueryRowContext(ctx, `SELECT size, mtime FROM blobs WHERE sha256 = ?`, keyBytes(key)).Scan(&size, &mtime)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, time.Time{}, fs.ErrNotExist
	}
	return size, time.UnixMicro(mtime), err
}

func (s *smallDB) delete(ctx context.Context, key string) error {
	s.forget(key)
	_, err := s.w.ExecContext(ctx, `DELETE FROM blobs WHERE sha256 = ?`, keyBytes(key))
	return err
}

// walk calls fn for every row, in pages so that fn may delete the row it is given.
func (s *smallDB) walk(ctx context.Context, fn func(key string, size int64, modTime time.Time) error) error {
	after := []byte{}
	for {
		rows, err := s.r.QueryContext(ctx, `SELECT sha256, size, mtime FROM blobs WHERE sha256 > ? ORDER BY sha256 LIMIT 1000`, after)
		if err != nil {
			return err
		}
		type row struct {
			key         []byte
			size, mtime int64
		}
		var page []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.key, &r.size, &r.mtime); err != nil {
				rows.Close()
				return err
			}
			page = append(page, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range page {
			if err := fn(hex.EncodeToString(r.key), r.size, time.UnixMicro(r.mtime)); err != nil {
				return err
			}
		}
		if len(page) < 1000 {
			return nil
		}
		after = page[len(page)-1].key
	}
}

// readSmall reads r up to max+1 bytes: all of r when it is small. small reports whether r
// ended within max bytes.
func readSmall(ctx context.Context, r io.Reader, max int) (head []byte, small bool, err error) {
	bp := readBufs.Get().(*[]byte)
	w := bytes.NewBuffer((*bp)[:0])
	n, err := io.Copy(w, io.LimitReader(ctxReader{ctx: ctx, r: r}, int64(max)+1))
	if err != nil {
		readBufs.Put(bp)
		return nil, false, err
	}
	if n > int64(max) {
		return w.Bytes(), false, nil // the caller streams it on: the buffer is not reused
	}
	// A small blob may be held for a while (staged, or in the recent cache): keep its bytes,
	// not the 64 KiB buffer they were read into.
	head = bytes.Clone(w.Bytes())
	readBufs.Put(bp)
	return head, true, nil
}

// readBufs holds the buffers readSmall reads into.
var readBufs = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

func sumHex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
