// Package blob stores content-addressed blobs: every blob is named by the hex
// SHA-256 of its bytes, so writing the same content twice is a no-op and a name,
// once handed out, always means the same bytes.
//
// [Store] is the seam the engine depends on. [Dir] keeps blobs in a local
// directory (the embedded default) and [S3] keeps them in an S3-compatible
// bucket (scale-out). Both lay blobs out as sha256/ab/cd/<hex>, where ab and cd
// are the first two byte pairs of the hex name.
//
// Durability follows DESIGN §4.7: when Put returns nil the blob is durable, so
// the caller may then commit the database row that references it. Because rows
// are committed after blobs, a crash can leave blobs that nothing references;
// [GC] removes them once they are older than a grace period.
package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"
)

// Store is a content-addressed blob store. Implementations are safe for
// concurrent use by multiple goroutines and, for [Dir] and [S3], by multiple
// processes sharing the same directory or bucket.
//
// Every method that takes a sha256 returns an error wrapping [ErrInvalidKey]
// when it is not 64 lowercase hex characters, before touching storage.
type Store interface {
	// Put streams r into the store and returns the hex SHA-256 of its bytes and
	// their count. It never holds the whole blob in memory. When Put returns nil
	// the blob is durable. Putting content that is already stored is idempotent
	// and refreshes the blob's modification time, so a blob that was just Put is
	// protected by GC's grace period even if it existed before. If ctx is
	// cancelled or r fails, Put returns the error and no partial blob becomes
	// visible.
	Put(ctx context.Context, r io.Reader) (sha256 string, size int64, err error)

	// Open returns a reader for the blob's bytes; the caller must close it.
	// It returns an error wrapping [ErrNotFound] if the blob is absent.
	Open(ctx context.Context, sha256 string) (io.ReadCloser, error)

	// Stat returns the blob's size in bytes, or an error wrapping
	// [ErrNotFound] if the blob is absent.
	Stat(ctx context.Context, sha256 string) (size int64, err error)

	// Delete removes the blob. Deleting an absent blob is not an error.
	Delete(ctx context.Context, sha256 string) error

	// Walk calls fn for each stored blob with its size and modification time,
	// in no particular order. It skips anything that is not a complete blob,
	// such as temporary files of Puts in progress or interrupted by a crash.
	// fn may Delete the blob it is given. Walk stops at and returns the first
	// error from fn (wrapped) or from ctx.
	Walk(ctx context.Context, fn func(sha256 string, size int64, modTime time.Time) error) error
}

// LocalPather is implemented by stores whose blobs are files on the local
// file system ([Dir]), so that tools can read them directly instead of copying
// them out through Open.
type LocalPather interface {
	// LocalPath returns the absolute path of the blob's file, or an error
	// wrapping [ErrNotFound] if it is absent. The file must be treated as
	// read-only.
	LocalPath(sha256 string) (string, error)
}

// Stager is implemented by stores that can take a small blob now and make it durable a moment
// later, together with others: a writer of many small blobs (an unpack of 10,000 entries, a
// converter's PDF and its thumbnail) then shares one fsync among them instead of waiting for one
// each. Whoever records a reference to the blob must call wait first.
type Stager interface {
	// Stage reads r as Put does and returns the blob's SHA-256 and size at once; the blob is
	// durable when wait returns nil. A blob too large to stage is stored as by Put before Stage
	// returns, and its wait returns nil. soon says the blob will be read back shortly (an input
	// of later steps): a store may keep it in memory for a while.
	Stage(ctx context.Context, r io.Reader, soon bool) (sha256 string, size int64, wait func() error, err error)
}

// Presigner is implemented by stores that can hand out time-limited URLs
// ([S3]), so that remote workers can download blobs without credentials.
type Presigner interface {
	// PresignGet returns a URL from which a plain HTTP GET downloads the blob
	// until ttl has passed.
	PresignGet(ctx context.Context, sha256 string, ttl time.Duration) (string, error)
}

// ErrNotFound is returned (wrapped) when a blob does not exist.
var ErrNotFound = errors.New("blob: not found")

// ErrInvalidKey is returned (wrapped) when a blob name is not 64 lowercase hex
// characters. Names are checked before they are turned into paths or object
// keys, so a name such as "../../etc/passwd" never reaches storage.
var ErrInvalidKey = errors.New("blob: invalid key")

// keyLen is the length of a hex SHA-256.
const keyLen = 2 * sha256.Size

// checkKey reports whether key is a valid blob name.
func checkKey(key string) error {
	if len(key) != keyLen {
		return fmt.Errorf("%w %q: want 64 lowercase hex characters, got %d characters", ErrInvalidKey, key, len(key))
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("%w %q: want 64 lowercase hex characters, got %q at offset %d", ErrInvalidKey, key, c, i)
		}
	}
	return nil
}

// blobPath returns the slash-separated path of a valid key relative to the
// store's root: sha256/ab/cd/<hex>.
func blobPath(key string) string {
	return "sha256/" + key[0:2] + "/" + key[2:4] + "/" + key
}

// copyBufSize is the buffer used to stream blobs; large enough to keep system
// calls cheap, small enough that memory never depends on blob size.
const copyBufSize = 256 << 10

// hashCopy copies r to w, hashing as it goes, and stops at the first Read
// after ctx is done.
func hashCopy(ctx context.Context, w io.Writer, r io.Reader) (sum string, n int64, err error) {
	h := sha256.New()
	n, err = io.CopyBuffer(io.MultiWriter(w, h), ctxReader{ctx: ctx, r: r}, make([]byte, copyBufSize))
	if err != nil {
		return "", n, err
	}
	return hexSum(h), n, nil
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

// ctxReader fails reads once ctx is done, so a Put of an endless or slow
// stream stops promptly when its caller gives up.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// The stores in this package implement two optional hooks that GC uses.
type (
	// modTimer re-reads a blob's modification time, so GC can notice a Put
	// that refreshed it after Walk listed it.
	modTimer interface {
		blobModTime(ctx context.Context, key string) (time.Time, error)
	}
	// staleCleaner removes leftovers of interrupted Puts (temporary files,
	// incomplete multipart uploads) started before the given time.
	staleCleaner interface {
		cleanStale(ctx context.Context, before time.Time) (freed int64, err error)
	}
)
