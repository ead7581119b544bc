package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/deflate"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// convCache is the conversion cache as the worker uses it: cacheable actions' results, stored
// by what they converted (cacheKey), replayed instead of running the action again; and the
// flights that make concurrent identical conversions wait for the first. It is safe for
// concurrent use.
//
// Its invariants:
//   - One flight per key: the task that owns it runs the action, commits its result with the
//     cache entry, and only then lands it (land); the tasks waiting then read the entry.
//   - A cache answer read in a lease's transaction (prefetch) is used only if no flight of its
//     key has landed since (landedSince): landings are counted, the last len(landRing) remembered.
type convCache struct {
	e      *engine.Engine
	commit *committer
	log    *slog.Logger
	// stepOf returns a task's action and step (the worker's, with its cache of jobs' workflows).
	stepOf func(ctx context.Context, t *record.Task) (action.Action, *workflow.Step, error)

	mu       sync.Mutex
	flights  map[string]chan struct{}
	landSeq  uint64
	landRing [1024]string
}

// seq returns how many flights have landed.
func (c *convCache) seq() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.landSeq
}

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

// cachedChild is a child of a cached result, with its slice of the task's progress.
type cachedChild struct {
	engine.Child
	From float64 `json:"from,omitempty"`
	To   float64 `json:"to,omitempty"`
}

// cacheKey identifies a conversion: the action and its version, the step's settings, the item's
// options (ocr, lang, split_by_page change the result) and the input's content. Names are not part
// of it, but children are named after their parent, so cached child names are rebased on replay.
func cacheKey(spec action.Spec, step *workflow.Step, it *record.Item) string {
	h := sha256.New()
	v := spec.Version
	if v == "" {
		v = "1"
	}
	with, _ := json.Marshal(step.With) // encoding/json sorts map keys: canonical
	// Numbers as written: two 20-digit options that round to the same float64 are two conversions.
	var opts map[string]any
	_ = metadata.Unmarshal(it.Options, &opts)
	optb, _ := json.Marshal(opts)
	for _, part := range [][]byte{[]byte(spec.Name), []byte(v), with, optb, []byte(it.BlobSHA256), []byte(it.ContentType)} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// get replays cached effects; concurrent identical conversions wait for the first
// (singleflight) and then replay its result. A cached permanent error is replayed only when
// replayError is set (a task's first attempt); otherwise it is deleted and the action runs again,
// so that a retry after its cause was fixed (`sluice job retry`) is not answered from the cache.
func (c *convCache) get(ctx context.Context, key string, out *output, replayError bool, pf *prefetch) (bool, error) {
	for {
		c.mu.Lock()
		ch, inFlight := c.flights[key]
		if !inFlight {
			c.flights[key] = make(chan struct{})
		}
		c.mu.Unlock()
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
	if pf != nil && pf.key == key && !c.landedSince(pf.seq, key) {
		// Read in the lease's transaction, and no flight of this key has landed since: the
		// entry is as it was then.
		raw, err = pf.raw, pf.err
	} else {
		raw, err = c.e.CachedEffects(ctx, key)
	}
	if errors.Is(err, store.ErrNotFound) {
		return false, nil // we own the flight; land() releases it
	}
	if err != nil {
		c.land(key)
		return false, err
	}
	var ef effects
	if raw, err = unpackEntry(raw); err != nil {
		c.land(key)
		return false, nil // unreadable: run the action, as for an entry that does not decode
	}
	if err := metadata.Unmarshal(raw, &ef); err != nil {
		c.land(key)
		return false, nil
	}
	if ef.Error != "" && !replayError {
		// Still owning the flight: the run's result is cached in the entry's place.
		if err := c.commit.do(ctx, func(t *engine.Tx) error { return t.Executor().CacheDelete(ctx, key) }); err != nil {
			c.land(key)
			return false, err
		}
		return false, nil
	}
	c.land(key)
	c.replay(ctx, &ef, out)
	if ef.Error != "" {
		return true, action.Permanentf("%s", ef.Error)
	}
	return true, nil
}

func (c *convCache) land(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.landSeq++
	c.landRing[c.landSeq%uint64(len(c.landRing))] = key
	if ch, ok := c.flights[key]; ok {
		close(ch)
		delete(c.flights, key)
	}
}

// replay records cached effects as this attempt's. Child names recorded under another parent's
// name are rebased onto this item's name.
func (c *convCache) replay(ctx context.Context, ef *effects, out *output) {
	res := out.result
	res.Text, res.ThumbnailSHA, res.ThumbnailType, res.ContentType = ef.Text, ef.ThumbnailSHA, ef.ThumbnailType, ef.ContentType
	res.Metadata, res.Events, res.Outputs = ef.Metadata, ef.Events, ef.Outputs
	for _, w := range ef.Writes {
		res.AddWrite(engine.DomainWrite{Domain: w.Domain, Key: w.Key, Payload: w.Payload})
	}
	kids := make([]*engine.NewChild, 0, len(ef.Children))
	for i, c := range ef.Children {
		if rest, ok := strings.CutPrefix(c.Name, ef.Parent); ok && ef.Parent != "" {
			c.Name = out.itemName + rest
		}
		kids = append(kids, engine.ChildOf(out.task, i, c.Child, c.From, c.To))
	}
	if len(kids) == 0 {
		return
	}
	if err := out.queueChildren(ctx, kids); err != nil {
		out.fail(err)
	}
}

// entry returns the cache entry of a run: its effects, or its permanent error.
func (c *convCache) entry(out *output, runErr error) []byte {
	ef := out.record
	if ef == nil {
		return nil // a resumed attempt (action.Resume) saw only some of its children: nothing to cache
	}
	res := out.result
	if res.WritesSpilled() {
		return nil // writes past a megabyte, kept in a temp file: too large to cache
	}
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
		c.log.Warn("cache result", "job_id", t.JobID, "item_id", t.ItemID, "task_id", t.ID, "action", t.Action, "attempt", t.Attempt, "error", err)
		return nil
	}
	return packEntry(raw)
}

// deflatedEntry begins a cache entry kept deflated; the uvarint length of its JSON follows, then
// the JSON deflated. An entry of plain JSON begins with '{', so both kinds read back.
const deflatedEntry = "\x00z"

// packEntry returns the entry to store for the JSON raw: deflated when that saves an eighth. A
// text document's entry holds its whole text, which the item holds too; deflated, the copy
// costs about half.
func packEntry(raw []byte) []byte {
	z, ok := deflate.Shrink(raw)
	if !ok {
		return raw
	}
	out := make([]byte, 0, len(deflatedEntry)+binary.MaxVarintLen64+len(z))
	out = append(out, deflatedEntry...)
	out = binary.AppendUvarint(out, uint64(len(raw)))
	return append(out, z...)
}

// unpackEntry returns the JSON of a stored entry.
func unpackEntry(stored []byte) ([]byte, error) {
	rest, ok := bytes.CutPrefix(stored, []byte(deflatedEntry))
	if !ok {
		return stored, nil
	}
	size, n := binary.Uvarint(rest)
	if n <= 0 || size > math.MaxInt32 {
		return nil, errors.New("cache entry: bad length")
	}
	return deflate.Inflate(rest[n:], int64(size))
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
func (c *convCache) landedSince(seq uint64, key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := uint64(len(c.landRing))
	if c.landSeq-seq >= n {
		return true
	}
	for s := seq + 1; s <= c.landSeq; s++ {
		if c.landRing[s%n] == key {
			return true
		}
	}
	return false
}

// prefetch reads, in the lease's transaction x, the leased tasks' items into items and the
// cache entries of their cacheable conversions into pre. What it cannot read is left for the
// task to read itself.
func (c *convCache) prefetch(ctx context.Context, x store.Executor, got []*record.Task, seq uint64, items map[int64]*record.Item, pre map[int64]*prefetch) {
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
		if it == nil || !c.e.Catalog().Policy(t.Action).Cacheable || it.BlobSHA256 == "" {
			continue
		}
		act, step, err := c.stepOf(ctx, t)
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
