// Package blobtest is the conformance suite every [blob.Store] runs, so the
// local directory and S3 stores are held to one contract.
package blobtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/blob"
)

// Exercise runs the conformance suite against stores made by newStore, which
// must return a new, empty store for each call (sub-tests run in parallel).
// Stores that implement [blob.LocalPather] or [blob.Presigner] have those
// checked too.
func Exercise(t *testing.T, newStore func(t *testing.T) blob.Store) {
	t.Helper()

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		shareHeap(t)
		s, ctx := newStore(t), t.Context()
		for _, tc := range []struct {
			name    string
			content []byte
		}{
			{name: "small", content: []byte("hello, sluice\n")},
			{name: "empty", content: nil},
			{name: "binary", content: bytes.Repeat([]byte{0, 1, 2, 255}, 3000)},
		} {
			sum, size := mustPut(t, s, tc.content)
			if want := hexSHA(tc.content); sum != want {
				t.Errorf("%s: Put sha256 = %s, want %s", tc.name, sum, want)
			}
			if size != int64(len(tc.content)) {
				t.Errorf("%s: Put size = %d, want %d", tc.name, size, len(tc.content))
			}
			if got := mustRead(t, s, sum); !bytes.Equal(got, tc.content) {
				t.Errorf("%s: Open read %q, want %q", tc.name, got, tc.content)
			}
			n, err := s.Stat(ctx, sum)
			if err != nil || n != size {
				t.Errorf("%s: Stat = %d, %v; want %d, nil", tc.name, n, err, size)
			}
		}
	})

	t.Run("IdempotentPut", func(t *testing.T) {
		t.Parallel()
		shareHeap(t)
		s := newStore(t)
		content := []byte("same bytes, twice")
		sum1, _ := mustPut(t, s, content)
		sum2, size := mustPut(t, s, content)
		if sum1 != sum2 || size != int64(len(content)) {
			t.Fatalf("second Put = %s, %d; want %s, %d", sum2, size, sum1, len(content))
		}
		if got := walkAll(t, s); len(got) != 1 {
			t.Fatalf("Walk found %d blobs, want 1: %v", len(got), got)
		}
		if got := mustRead(t, s, sum1); !bytes.Equal(got, content) {
			t.Fatalf("read %q after second Put, want %q", got, content)
		}
	})

	t.Run("Large", func(t *testing.T) {
		t.Parallel()
		ownHeap(t)
		s, ctx := newStore(t), t.Context()
		const size = 64 << 20
		want := hashStream(t, genReader(1, size))

		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapAlloc
		mr := &memReader{r: genReader(1, size), every: 4 << 20}
		sum, n, err := s.Put(ctx, mr)
		if err != nil {
			t.Fatalf("Put 64 MiB: %v", err)
		}
		if sum != want || n != size {
			t.Fatalf("Put = %s, %d; want %s, %d", sum, n, want, size)
		}
		// If Put buffered the stream, the heap would have grown by almost all
		// of it by the last sample. Other parallel tests add some noise.
		grew := int64(mr.peak) - int64(base)
		t.Logf("heap grew by at most %d MiB while Put read 64 MiB", grew>>20)
		if grew > 40<<20 {
			t.Errorf("heap grew by %d MiB while Put read 64 MiB; Put must stream", grew>>20)
		}

		rc, err := s.Open(ctx, sum)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer rc.Close()
		if got := hashStream(t, rc); got != want {
			t.Fatalf("read back sha256 %s, want %s", got, want)
		}
		if got, err := s.Stat(ctx, sum); err != nil || got != size {
			t.Fatalf("Stat = %d, %v; want %d", got, err, size)
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		shareHeap(t)
		s, ctx := newStore(t), t.Context()
		absent := hexSHA([]byte("never stored"))
		if _, err := s.Open(ctx, absent); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Open(absent) error = %v, want ErrNotFound", err)
		}
		if _, err := s.Stat(ctx, absent); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Stat(absent) error = %v, want ErrNotFound", err)
		}
		if err := s.Delete(ctx, absent); err != nil {
			t.Errorf("Delete(absent) = %v, want nil", err)
		}
		if lp, ok := s.(blob.LocalPather); ok {
			if _, err := lp.LocalPath(absent); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("LocalPath(absent) error = %v, want ErrNotFound", err)
			}
		}
	})

	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		shareHeap(t)
		s, ctx := newStore(t), t.Context()
		sum, _ := mustPut(t, s, []byte("to be deleted"))
		keep, _ := mustPut(t, s, []byte("to be kept"))
		if err := s.Delete(ctx, sum); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if _, err := s.Open(ctx, sum); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Open after Delete error = %v, want ErrNotFound", err)
		}
		if err := s.Delete(ctx, sum); err != nil {
			t.Errorf("second Delete = %v, want nil", err)
		}
		if got := walkAll(t, s); len(got) != 1 || got[keep] == 0 {
			t.Errorf("Walk after Delete = %v, want only %s", got, keep)
		}
		// Content can come back after deletion.
		mustPut(t, s, []byte("to be deleted"))
		if got := mustRead(t, s, sum); string(got) != "to be deleted" {
			t.Errorf("read %q after re-Put", got)
		}
	})

	t.Run("ConcurrentSamePut", func(t *testing.T) {
		t.Parallel()
		shareHeap(t)
		s, ctx := newStore(t), t.Context()
		const size = 3 << 20 // several writes per Put, so they interleave
		want := hashStream(t, genReader(2, size))
		var wg sync.WaitGroup
		errs := make([]error, 16)
		for i := range errs {
			wg.Go(func() {
				sum, n, err := s.Put(ctx, genReader(2, size))
				if err == nil && (sum != want || n != size) {
					err = fmt.Errorf("got %s, %d; want %s, %d", sum, n, want, size)
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("Put %d: %v", i, err)
			}
		}
		if got := walkAll(t, s); len(got) != 1 || got[want] != size {
			t.Fatalf("Walk = %v, want one blob %s of %d bytes", got, want, size)
		}
		rc, err := s.Open(ctx, want)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer rc.Close()
		if got := hashStream(t, rc); got != want {
			t.Fatalf("read back sha256 %s, want %s", got, want)
		}
	})

	t.Run("InvalidKey", func(t *testing.T) {
		t.Parallel()
		shareHeap(t)
		s, ctx := newStore(t), t.Context()
		good := hexSHA([]byte("x"))
		for _, tc := range []struct{ name, key string }{
			{name: "traversal", key: "../../etc/passwd"},
			{name: "traversal padded to 64", key: "../../../../../../../../../../../../../../../../../../etc/passwd"},
			{name: "empty", key: ""},
			{name: "uppercase", key: strings.ToUpper(good)},
			{name: "short", key: good[:63]},
			{name: "long", key: good + "0"},
			{name: "slash", key: good[:10] + "/" + good[11:]},
			{name: "nul", key: good[:63] + "\x00"},
			{name: "layout path", key: "sha256/" + good[:2] + "/" + good[2:4] + "/" + good},
		} {
			check := func(op string, err error) {
				t.Helper()
				if !errors.Is(err, blob.ErrInvalidKey) {
					t.Errorf("%s: %s error = %v, want ErrInvalidKey", tc.name, op, err)
				} else if !strings.Contains(err.Error(), "64 lowercase hex") {
					t.Errorf("%s: %s error %q does not say what a key must be", tc.name, op, err)
				}
			}
			_, err := s.Open(ctx, tc.key)
			check("Open", err)
			_, err = s.Stat(ctx, tc.key)
			check("Stat", err)
			check("Delete", s.Delete(ctx, tc.key))
			if lp, ok := s.(blob.LocalPather); ok {
				_, err = lp.LocalPath(tc.key)
				check("LocalPath", err)
			}
			if ps, ok := s.(blob.Presigner); ok {
				_, err = ps.PresignGet(ctx, tc.key, time.Minute)
				check("PresignGet", err)
			}
		}
	})

	t.Run("Walk", func(t *testing.T) {
		t.Parallel()
		shareHeap(t)
		s, ctx := newStore(t), t.Context()
		if got := walkAll(t, s); len(got) != 0 {
			t.Fatalf("Walk of empty store = %v", got)
		}
		want := map[string]int64{}
		start := time.Now()
		for i := range 5 {
			sum, size := mustPut(t, s, bytes.Repeat([]byte{byte('a' + i)}, i*100))
			want[sum] = size
		}
		got := map[string]int64{}
		err := s.Walk(ctx, func(sum string, size int64, mod time.Time) error {
			if _, dup := got[sum]; dup {
				t.Errorf("Walk reported %s twice", sum)
			}
			got[sum] = size
			// Servers may truncate to the second and clocks may differ a little.
			if mod.Before(start.Add(-time.Minute)) || mod.After(time.Now().Add(time.Minute)) {
				t.Errorf("Walk modTime of %s = %v, want about %v", sum, mod, start)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Walk: %v", err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("Walk = %v, want %v", got, want)
		}

		stop := errors.New("stop")
		calls := 0
		err = s.Walk(ctx, func(string, int64, time.Time) error { calls++; return stop })
		if !errors.Is(err, stop) || calls != 1 {
			t.Fatalf("Walk with failing fn = %v after %d calls; want the error after 1 call", err, calls)
		}

		// fn may delete the blob it is given.
		err = s.Walk(ctx, func(sum string, _ int64, _ time.Time) error { return s.Delete(ctx, sum) })
		if err != nil {
			t.Fatalf("Walk deleting: %v", err)
		}
		if got := walkAll(t, s); len(got) != 0 {
			t.Fatalf("Walk after deleting all = %v", got)
		}
	})

	t.Run("GC", func(t *testing.T) {
		t.Parallel()
		shareHeap(t)
		s, ctx := newStore(t), t.Context()
		ref, _ := mustPut(t, s, []byte("referenced"))
		unref1, size1 := mustPut(t, s, []byte("unreferenced one"))
		unref2, size2 := mustPut(t, s, []byte("unreferenced two, longer"))
		referenced := func(sum string) (bool, error) { return sum == ref, nil }

		// Just written: within grace, nothing goes.
		deleted, freed, err := blob.GC(ctx, s, referenced, time.Hour, time.Now())
		if err != nil || deleted != 0 || freed != 0 {
			t.Fatalf("GC within grace = %d, %d, %v; want 0, 0, nil", deleted, freed, err)
		}
		if got := walkAll(t, s); len(got) != 3 {
			t.Fatalf("after GC within grace, Walk = %v, want 3 blobs", got)
		}

		boom := errors.New("database down")
		_, _, err = blob.GC(ctx, s, func(string) (bool, error) { return false, boom }, time.Hour, time.Now().Add(2*time.Hour))
		if !errors.Is(err, boom) {
			t.Fatalf("GC with failing referenced = %v, want %v", err, boom)
		}
		if got := walkAll(t, s); len(got) != 3 {
			t.Fatalf("after failed GC, Walk = %v, want 3 blobs", got)
		}

		// Two hours on: unreferenced blobs are past grace.
		deleted, freed, err = blob.GC(ctx, s, referenced, time.Hour, time.Now().Add(2*time.Hour))
		if err != nil || deleted != 2 || freed != size1+size2 {
			t.Fatalf("GC past grace = %d, %d, %v; want 2, %d, nil", deleted, freed, err, size1+size2)
		}
		got := walkAll(t, s)
		if len(got) != 1 || got[ref] == 0 {
			t.Fatalf("after GC, Walk = %v, want only %s", got, ref)
		}
		for _, sum := range []string{unref1, unref2} {
			if _, err := s.Stat(ctx, sum); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("Stat(%s) after GC = %v, want ErrNotFound", sum, err)
			}
		}

		if _, _, err := blob.GC(ctx, s, referenced, -time.Second, time.Now()); err == nil {
			t.Errorf("GC with negative grace succeeded")
		}
	})

	t.Run("CancelMidPut", func(t *testing.T) {
		t.Parallel()
		shareHeap(t)
		s := newStore(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		const size = 64 << 20
		r := &cancelReader{r: genReader(3, size), after: 1 << 20, cancel: cancel}
		_, _, err := s.Put(ctx, r)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Put cancelled mid-stream = %v, want context.Canceled", err)
		}
		if r.n >= size {
			t.Errorf("Put read all %d bytes after cancellation", r.n)
		}
		if got := walkAll(t, s); len(got) != 0 {
			t.Fatalf("after cancelled Put, Walk = %v, want nothing", got)
		}

		_, _, err = s.Put(ctx, strings.NewReader("too late"))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Put with cancelled ctx = %v, want context.Canceled", err)
		}
		if got := walkAll(t, s); len(got) != 0 {
			t.Fatalf("after Put with cancelled ctx, Walk = %v, want nothing", got)
		}
	})

	t.Run("ReaderError", func(t *testing.T) {
		t.Parallel()
		shareHeap(t)
		s, ctx := newStore(t), t.Context()
		boom := errors.New("disk on fire")
		_, _, err := s.Put(ctx, io.MultiReader(strings.NewReader("partial"), errReader{boom}))
		if !errors.Is(err, boom) {
			t.Fatalf("Put of failing reader = %v, want %v", err, boom)
		}
		if got := walkAll(t, s); len(got) != 0 {
			t.Fatalf("after failed Put, Walk = %v, want nothing", got)
		}
	})

	t.Run("LocalPath", func(t *testing.T) {
		t.Parallel()
		shareHeap(t)
		s := newStore(t)
		lp, ok := s.(blob.LocalPather)
		if !ok {
			t.Skip("store does not implement blob.LocalPather")
		}
		content := []byte("read me directly")
		sum, _ := mustPut(t, s, content)
		p, err := lp.LocalPath(sum)
		if err != nil {
			t.Fatalf("LocalPath: %v", err)
		}
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("ReadFile(LocalPath) = %q, %v; want %q", got, err, content)
		}
	})

	t.Run("PresignGet", func(t *testing.T) {
		t.Parallel()
		shareHeap(t)
		s, ctx := newStore(t), t.Context()
		ps, ok := s.(blob.Presigner)
		if !ok {
			t.Skip("store does not implement blob.Presigner")
		}
		content := []byte("download me without credentials")
		sum, _ := mustPut(t, s, content)
		u, err := ps.PresignGet(ctx, sum, 5*time.Minute)
		if err != nil {
			t.Fatalf("PresignGet: %v", err)
		}
		if got, code := httpGet(t, u); code != http.StatusOK || !bytes.Equal(got, content) {
			t.Fatalf("GET presigned URL = %d %q; want 200 %q", code, got, content)
		}
		// A tampered signature is refused.
		if _, code := httpGet(t, strings.Replace(u, "X-Amz-Signature=", "X-Amz-Signature=0", 1)); code != http.StatusForbidden {
			t.Errorf("GET with tampered signature = %d, want 403", code)
		}
		if _, err := ps.PresignGet(ctx, sum, 0); err == nil {
			t.Errorf("PresignGet with zero ttl succeeded")
		}
	})
}

// heapMu lets Large measure the heap while no other sub-test of any running
// Exercise allocates: Large holds it exclusively, the others shared.
var heapMu sync.RWMutex

func shareHeap(t *testing.T) {
	heapMu.RLock()
	t.Cleanup(heapMu.RUnlock)
}

func ownHeap(t *testing.T) {
	heapMu.Lock()
	t.Cleanup(heapMu.Unlock)
}

func httpGet(t *testing.T, u string) ([]byte, int) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", u, err)
	}
	return body, resp.StatusCode
}

func mustPut(t *testing.T, s blob.Store, content []byte) (string, int64) {
	t.Helper()
	sum, size, err := s.Put(t.Context(), bytes.NewReader(content))
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	return sum, size
}

func mustRead(t *testing.T, s blob.Store, sum string) []byte {
	t.Helper()
	rc, err := s.Open(t.Context(), sum)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", sum, err)
	}
	return b
}

func walkAll(t *testing.T, s blob.Store) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	if err := s.Walk(t.Context(), func(sum string, size int64, _ time.Time) error {
		got[sum] = size
		return nil
	}); err != nil {
		t.Fatalf("Walk: %v", err)
	}
	return got
}

func hexSHA(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func hashStream(t *testing.T, r io.Reader) string {
	t.Helper()
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		t.Fatalf("hash stream: %v", err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// genReader produces size deterministic pseudo-random bytes for seed without
// holding them, so tests can Put blobs larger than they want in memory.
func genReader(seed uint64, size int64) io.Reader {
	var key [32]byte
	key[0] = byte(seed)
	return io.LimitReader(rand.NewChaCha8(key), size)
}

// memReader samples the heap every so many bytes read.
type memReader struct {
	r       io.Reader
	every   int64
	n, next int64
	peak    uint64
}

func (m *memReader) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	m.n += int64(n)
	if m.n >= m.next {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		m.peak = max(m.peak, ms.HeapAlloc)
		m.next = m.n + m.every
	}
	return n, err
}

// cancelReader calls cancel once it has produced after bytes and keeps going.
type cancelReader struct {
	r      io.Reader
	after  int64
	n      int64
	cancel context.CancelFunc
}

func (c *cancelReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n >= c.after {
		c.cancel()
	}
	return n, err
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
