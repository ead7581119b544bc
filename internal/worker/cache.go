package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// effects is what a cacheable action did to one input: enough to replay it on another item with
// the same content without running the action again.
type effects struct {
	Children      []cachedChild              `json:"children,omitempty"`
	Text          *string                    `json:"text,omitempty"`
	ThumbnailSHA  string                     `json:"thumbnail_sha256,omitempty"`
	ThumbnailType string                     `json:"thumbnail_type,omitempty"`
	Metadata      map[string]any             `json:"metadata,omitempty"`
	ContentType   string                     `json:"content_type,omitempty"`
	Events        []string                   `json:"events,omitempty"`
	Outputs       map[string]json.RawMessage `json:"outputs,omitempty"`
	Writes        []cachedWrite              `json:"writes,omitempty"`
	Error         string                     `json:"error,omitempty"` // a permanent error
	Parent        string                     `json:"parent"`          // the item name children were named under
}

// cachedWrite is a domain write of a cached result, replayed with it (the domain keys it on the
// item that replays it).
type cachedWrite struct {
	Domain  string          `json:"domain"`
	Key     string          `json:"key"`
	Payload json.RawMessage `json:"payload"`
}

type cachedChild struct {
	Name          string         `json:"name"`
	ContentType   string         `json:"content_type,omitempty"`
	BlobSHA256    string         `json:"sha256,omitempty"`
	Size          int64          `json:"size,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
	Options       map[string]any `json:"options,omitempty"`
	Text          *string        `json:"text,omitempty"`
	ThumbnailSHA  string         `json:"thumbnail_sha256,omitempty"`
	ThumbnailType string         `json:"thumbnail_type,omitempty"`
	From          float64        `json:"from,omitempty"`
	To            float64        `json:"to,omitempty"`
}

// cacheKey identifies a conversion: the action and its version, the step's settings, the item's
// options (ocr, lang, split_by_page change the result) and the input's content. Names are not part
// of it, but children are named after their parent, so cached child names are rebased on replay.
func cacheKey(spec action.Spec, step *workflow.Step, it *store.Item) string {
	h := sha256.New()
	v := spec.Version
	if v == "" {
		v = "1"
	}
	with, _ := json.Marshal(step.With) // encoding/json sorts map keys: canonical
	var opts map[string]any
	_ = json.Unmarshal(it.Options, &opts)
	optb, _ := json.Marshal(opts)
	for _, part := range [][]byte{[]byte(spec.Name), []byte(v), with, optb, []byte(it.BlobSHA256), []byte(it.ContentType)} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// fromCache replays cached effects; concurrent identical conversions wait for the first
// (singleflight) and then replay its result. A cached permanent error is replayed only when
// replayError is set (a task's first attempt); otherwise it is deleted and the action runs again,
// so that a retry after its cause was fixed (`sluice job retry`) is not answered from the cache.
func (w *Worker) fromCache(ctx context.Context, key string, out *output, replayError bool, pf *prefetch) (bool, error) {
	for {
		w.mu.Lock()
		ch, inFlight := w.flights[key]
		if !inFlight {
			w.flights[key] = make(chan struct{})
		}
		w.mu.Unlock()
		if inFlight {
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return false, ctx.Err()
			}
		}
		break
	}
	var raw []byte
	var err error
	if pf != nil && pf.key == key && !w.landedSince(pf.seq, key) {
		// Read in the lease's transaction, and no flight of this key has landed since: the
		// entry is as it was then.
		raw, err = pf.raw, pf.err
	} else {
		raw, err = w.e.Store().CacheGet(ctx, key)
	}
	if errors.Is(err, store.ErrNotFound) {
		return false, nil // we own the flight; land() releases it
	}
	if err != nil {
		w.land(key)
		return false, err
	}
	var ef effects
	if err := json.Unmarshal(raw, &ef); err != nil {
		w.land(key)
		return false, nil
	}
	if ef.Error != "" && !replayError {
		// Still owning the flight: the run's result is cached in the entry's place.
		if err := w.commit.do(ctx, func(t *engine.Tx) error { return t.Executor().CacheDelete(ctx, key) }); err != nil {
			w.land(key)
			return false, err
		}
		return false, nil
	}
	w.land(key)
	w.replay(ctx, &ef, out)
	if ef.Error != "" {
		return true, action.Permanentf("%s", ef.Error)
	}
	return true, nil
}

func (w *Worker) land(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.landSeq++
	w.landRing[w.landSeq%uint64(len(w.landRing))] = key
	if ch, ok := w.flights[key]; ok {
		close(ch)
		delete(w.flights, key)
	}
}

// replay applies cached effects to this attempt's output. Child names recorded under another
// parent's name are rebased onto this item's name.
func (w *Worker) replay(ctx context.Context, ef *effects, out *output) {
	res := out.result
	res.Text, res.ThumbnailSHA, res.ThumbnailType, res.ContentType = ef.Text, ef.ThumbnailSHA, ef.ThumbnailType, ef.ContentType
	res.Metadata, res.Events, res.Outputs = ef.Metadata, ef.Events, ef.Outputs
	for _, w := range ef.Writes {
		res.Writes = append(res.Writes, engine.DomainWrite{Domain: w.Domain, Key: w.Key, Payload: w.Payload})
	}
	for i, c := range ef.Children {
		name := c.Name
		if rest, ok := strings.CutPrefix(name, ef.Parent); ok && ef.Parent != "" {
			name = out.itemName + rest
		}
		nc := &engine.NewChild{Task: out.task, Ordinal: i, Name: name, ContentType: c.ContentType, BlobSHA256: c.BlobSHA256, Size: c.Size,
			Metadata: c.Metadata, Options: c.Options, Text: c.Text, ThumbnailSHA: c.ThumbnailSHA, ThumbnailType: c.ThumbnailType,
			ProgressFrom: c.From, ProgressTo: c.To}
		if err := out.queueChild(ctx, nc); err != nil {
			out.mu.Lock()
			out.childErr = err
			out.mu.Unlock()
			return
		}
	}
}

// cacheEntry returns the cache entry of a run: its effects, or its permanent error.
func (w *Worker) cacheEntry(out *output, runErr error) []byte {
	ef := out.record
	if ef == nil {
		return nil // a resumed attempt (action.Resume) saw only some of its children: nothing to cache
	}
	res := out.result
	ef.Text, ef.ThumbnailSHA, ef.ThumbnailType, ef.ContentType = res.Text, res.ThumbnailSHA, res.ThumbnailType, res.ContentType
	ef.Metadata, ef.Events, ef.Outputs = res.Metadata, res.Events, res.Outputs
	for _, w := range res.Writes {
		ef.Writes = append(ef.Writes, cachedWrite{Domain: w.Domain, Key: w.Key, Payload: w.Payload})
	}
	if runErr != nil {
		ef.Error = runErr.Error()
	}
	raw, err := json.Marshal(ef)
	if err != nil {
		t := res.Task
		w.log.Warn("cache result", "job_id", t.JobID, "item_id", t.ItemID, "task_id", t.ID, "action", t.Action, "attempt", t.Attempt, "error", err)
		return nil
	}
	return raw
}

// prefetch is a task's cache entry as its lease's transaction read it.
type prefetch struct {
	key string
	raw []byte
	err error  // store.ErrNotFound for a miss
	seq uint64 // landSeq before the lease
}

// landedSince reports whether a flight of key may have landed since landSeq was seq (it had, or
// too many landed to tell).
func (w *Worker) landedSince(seq uint64, key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := uint64(len(w.landRing))
	if w.landSeq-seq >= n {
		return true
	}
	for s := seq + 1; s <= w.landSeq; s++ {
		if w.landRing[s%n] == key {
			return true
		}
	}
	return false
}

// prefetch reads, in the lease's transaction x, the leased tasks' items into items and the
// cache entries of their cacheable conversions into pre. What it cannot read is left for the
// task to read itself.
func (w *Worker) prefetch(ctx context.Context, x store.Executor, got []*store.Task, seq uint64, items map[int64]*store.Item, pre map[int64]*prefetch) {
	ids := make([]int64, len(got))
	for i, t := range got {
		ids[i] = t.ItemID
	}
	its, err := x.ItemGetMany(ctx, ids)
	if err != nil {
		return
	}
	for _, it := range its {
		items[it.ID] = it
	}
	for _, t := range got {
		it := items[t.ItemID]
		if spec, _ := w.e.Catalog().Spec(t.Action); it == nil || !spec.Cacheable || it.BlobSHA256 == "" {
			continue
		}
		act, step, err := w.stepOf(ctx, t)
		if err != nil {
			continue // the task meets it itself
		}
		key := cacheKey(act.Spec(), step, it)
		raw, err := x.CacheGet(ctx, key)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			continue
		}
		pre[t.ID] = &prefetch{key: key, raw: raw, err: err, seq: seq}
	}
}
