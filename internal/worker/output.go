package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
)

// output implements action.Output for one attempt. Children are recorded asynchronously through
// the committer (their blobs are durable first), so a long action commits them as it goes without
// waiting a transaction per child; the task's completion is queued after them and so commits last.
type output struct {
	w      *Worker
	task   *record.Task
	spec   action.Spec
	brief  bool // the action's policy is Brief: it creates no children
	ctx    context.Context
	result *engine.Result
	// itemName is the item's derived path, for rebasing cached child names.
	itemName string

	mu       sync.Mutex
	ordinal  int
	progress float64
	lastP    float64
	existing *earlier // children recorded by an earlier attempt (nil: none)
	childErr error
	pending  sync.WaitGroup
	// returned is set once the action has returned: a child whose blobs become durable after that
	// is not committed on its own but goes with the result (its Effects.Children), in the same
	// transaction.
	returned bool
	// group is the open group of children to record (see childGroup), nil when none is;
	// closed holds groups closed at maxGroup and not yet submitted, oldest first; flying counts
	// the groups whose op is queued or committing: at most one per lane (see commitChild).
	group  *childGroup
	closed []*childGroup
	flying int
	staged chan struct{} // a slot per child whose blobs are not yet durable; see maxStaged
	// unrecorded holds a slot per child not yet committed; see maxUnrecorded.
	unrecorded chan struct{}
	beat       func()
	// advanced, when set, is called on each step of progress: a child, a greater Progress
	// (it restarts an idle timeout; see action.Policy.IdleTimeout).
	advanced func()
	// record, when set, collects the effects for the conversion cache.
	record *effects
	// backlog admits each new child against the job's backlog bound; pause is called as the
	// attempt starts and ends waiting there (see engine.Backlog.Admit). Nil admits all.
	backlog *engine.Backlog
	pause   func(waiting bool) error
}

var _ action.Output = (*output)(nil)

func (o *output) failed() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.childErr
}

func (o *output) CreateChild(ctx context.Context, c action.Child) error {
	if err := o.failed(); err != nil {
		return err
	}
	if o.brief {
		// A brief action declares it creates none: its tasks may run in a brief batch, whose
		// transaction is the lease, while children commit in transactions of their own. The
		// same error on every driver.
		err := action.Permanentf("action %s is brief (Policy.Brief) and cannot create children", o.spec.Name)
		o.fail(err)
		return err
	}
	o.advance()
	o.mu.Lock()
	ord := o.ordinal
	o.ordinal++
	from, to := o.lastP, o.progress
	o.lastP = o.progress
	prev, err := o.existing.at(ctx, ord)
	o.mu.Unlock()
	if err != nil {
		return err
	}
	if c.Name == "" {
		return fmt.Errorf("child %d: empty name", ord)
	}
	child := engine.Child{Name: c.Name, ContentType: c.ContentType, Metadata: c.Metadata, Options: c.Options, Text: c.Text,
		ThumbnailType: c.ThumbnailType}
	if c.BlobSHA256 != "" {
		if c.Blob != nil {
			return fmt.Errorf("child %q: both Blob and BlobSHA256 are set", c.Name)
		}
		n, err := o.w.cfg.Blobs.Stat(ctx, c.BlobSHA256)
		if errors.Is(err, blob.ErrNotFound) {
			return action.Permanentf("child %q: blob %s is not in the blob store", c.Name, c.BlobSHA256)
		} else if err != nil {
			return fmt.Errorf("child %q: find blob %s: %w", c.Name, c.BlobSHA256, err)
		}
		child.BlobSHA256, child.Size = c.BlobSHA256, n
	}
	if prev != nil && c.Thumbnail == nil {
		// Replay: hash without storing; identical content means the child exists already.
		if c.Blob != nil {
			h := sha256.New()
			n, err := io.Copy(h, c.Blob)
			if err != nil {
				return fmt.Errorf("read child %q: %w", c.Name, err)
			}
			child.BlobSHA256, child.Size = hex.EncodeToString(h.Sum(nil)), n
		}
		child.ThumbnailType = ""
		nc := engine.ChildOf(o.task, ord, child, from, to)
		if err := engine.Replays(prev, nc, o.itemName); err != nil {
			return err
		}
		o.recordChild(nc)
		return nil
	}
	// A new child waits here while the job's backlog is at its bound: the action blocks in
	// this call (Overview's stall), and its children so far stay committed.
	if o.backlog != nil {
		if err := o.backlog.Admit(ctx, o.pause); err != nil {
			return err
		}
	}
	// The blobs are staged, not waited for: their durability is awaited by the goroutine that
	// records the child, so an action that makes many small children shares each fsync among
	// them. At most maxStaged children wait at once (memory: small blobs are held until durable).
	select {
	case o.unrecorded <- struct{}{}:
	case <-ctx.Done():
		o.settle()
		return ctx.Err()
	}
	select {
	case o.staged <- struct{}{}:
	case <-ctx.Done():
		<-o.unrecorded
		o.settle()
		return ctx.Err()
	}
	var waits []func() error
	put := func(r io.Reader, soon bool) (string, int64, error) {
		if st, ok := o.w.cfg.Blobs.(blob.Stager); ok {
			sha, n, wait, err := st.Stage(ctx, r, soon)
			if err == nil {
				waits = append(waits, wait)
			}
			return sha, n, err
		}
		return o.w.cfg.Blobs.Put(ctx, r)
	}
	if c.Blob != nil {
		var err error
		// A child without its text yet will be detected and converted: its blob is read soon.
		if child.BlobSHA256, child.Size, err = put(c.Blob, c.Text == nil); err != nil {
			<-o.staged
			<-o.unrecorded
			o.settle()
			return fmt.Errorf("store child %q: %w", c.Name, err)
		}
	}
	if c.Thumbnail != nil {
		var err error
		if child.ThumbnailSHA, _, err = put(c.Thumbnail, false); err != nil {
			<-o.staged
			<-o.unrecorded
			o.settle()
			return fmt.Errorf("store thumbnail of child %q: %w", c.Name, err)
		}
	}
	nc := engine.ChildOf(o.task, ord, child, from, to)
	o.recordChild(nc)
	o.pending.Add(1)
	go func() {
		defer o.pending.Done()
		defer func() { <-o.unrecorded }()
		for _, wait := range waits {
			if err := wait(); err != nil {
				<-o.staged
				o.settle()
				o.fail(fmt.Errorf("store child %q: %w", c.Name, err))
				return
			}
		}
		<-o.staged // durable: its blobs are no longer held
		withResult, err := o.commitChild(ctx, nc)
		if !withResult {
			o.settle() // committed, or will not be; one queued with the result settles when it commits
		}
		o.fail(err)
	}()
	return nil
}

// childGroup is children whose blobs are durable, recorded together by one op of the committer
// (one multi-row insert, the parent's row locked once): the children that become durable while
// earlier groups of the attempt are recorded join the open group, so a fast fan-out commits in
// batches as large as the groups committing let the next grow.
type childGroup struct {
	kids      []*engine.NewChild
	submitted bool
	done      chan struct{}
	err       error
}

// commitChild records the child with the open group and waits for the group's commit. After the
// action returned, the child goes with the result instead.
//
// At most one group of an attempt per lane of the committer is in it at a time (two on
// Postgres, one on SQLite); the next is submitted when one has committed, and a group is closed
// at maxGroup children, so that those committing leave the next room to grow. A group used to be
// submitted at once to an idle lane, with whatever had joined by then: with two lanes on
// Postgres, while one committed a group of 2,046 children (holding as many of maxUnrecorded's
// slots), the other committed the children made meanwhile one transaction each, as each freed
// one slot for the next — 40 to 75 groups of one child after each large one
// (docs/performance.md).
func (o *output) commitChild(ctx context.Context, nc *engine.NewChild) (withResult bool, err error) {
	o.mu.Lock()
	if o.returned {
		o.result.AddChild(nc)
		o.mu.Unlock()
		return true, nil
	}
	g := o.group
	if g == nil {
		g = &childGroup{done: make(chan struct{})}
		o.group = g
	}
	g.kids = append(g.kids, nc)
	if len(g.kids) >= maxGroup {
		o.group = nil
		if !g.submitted {
			o.closed = append(o.closed, g)
		}
	}
	next := o.nextGroup()
	o.mu.Unlock()
	if next != nil {
		o.submitGroup(ctx, next)
	}
	<-g.done
	return false, g.err
}

// nextGroup returns the group to submit now, marked submitted, or nil: none while each lane
// has one; else the oldest closed group, else the open one. o.mu is held.
func (o *output) nextGroup() *childGroup {
	if o.flying >= o.w.commit.lanes {
		return nil
	}
	var g *childGroup
	if len(o.closed) > 0 {
		g, o.closed = o.closed[0], o.closed[1:]
	} else if o.group != nil && !o.group.submitted {
		g = o.group
	}
	if g != nil {
		g.submitted = true
		o.flying++
	}
	return g
}

// submitGroup queues g's op; when it has committed (or failed), the next group goes. The group
// is closed when its op first runs (a retry runs the same children).
func (o *output) submitGroup(ctx context.Context, g *childGroup) {
	for g != nil {
		taken := false
		fn := func(t *engine.Tx) error {
			if !taken {
				o.mu.Lock()
				if o.group == g {
					o.group = nil
				}
				o.mu.Unlock()
				taken = true
			}
			return t.CreateChildren(g.kids)
		}
		err := o.w.commit.submitAfter(ctx, fn, func(err error) {
			// On the committer's goroutine, which must not wait for the committer: the next
			// group is queued from a goroutine of its own.
			if next := o.landed(g, err); next != nil {
				go o.submitGroup(ctx, next)
			}
		})
		if err == nil {
			return
		}
		g = o.landed(g, err)
	}
}

// landed ends g's wait with err and returns the group to submit next, if any.
func (o *output) landed(g *childGroup, err error) *childGroup {
	o.mu.Lock()
	if o.group == g {
		o.group = nil
	}
	o.flying--
	next := o.nextGroup()
	o.mu.Unlock()
	g.err = err
	close(g.done)
	return next
}

// maxCachedChildren is the most children a result may have and still be cached.
const maxCachedChildren = 1000

// maxStaged bounds the children of one attempt whose blobs are staged but not yet durable.
const maxStaged = 256

// maxUnrecorded bounds the children of one attempt not yet recorded (committed): it bounds a
// group of children, and the memory of an action that makes them faster than they commit.
const maxUnrecorded = 2048

// maxGroup closes a group of children: a quarter of maxUnrecorded, so that the next group can
// grow as large while one commits on each of Postgres's two lanes.
const maxGroup = maxUnrecorded / 4

// settle tells the backlog bound that an admitted child is committed, or will not be.
func (o *output) settle() {
	if o.backlog != nil {
		o.backlog.Settled(1)
	}
}

// fail records the first error of recording a child; the attempt then fails with it.
func (o *output) fail(err error) {
	if err == nil {
		return
	}
	o.mu.Lock()
	if o.childErr == nil {
		o.childErr = err
	}
	o.mu.Unlock()
}

// queueChildren records children whose blobs are already durable (a cached conversion's, at
// most maxCachedChildren) in one op: one multi-row insert (Tx.CreateChildren).
func (o *output) queueChildren(ctx context.Context, ncs []*engine.NewChild) error {
	done := make(chan error, 1)
	o.pending.Add(1)
	if err := o.w.commit.submit(ctx, func(t *engine.Tx) error { return t.CreateChildren(ncs) }, done); err != nil {
		o.pending.Done()
		return err
	}
	go func() {
		defer o.pending.Done()
		o.fail(<-done)
	}()
	return nil
}

// recordChild records nc for the conversion cache.
func (o *output) recordChild(nc *engine.NewChild) {
	if o.record == nil {
		return
	}
	if len(o.record.Children) >= maxCachedChildren {
		// Holding every child of a large fan-out (an archive of 100,000 entries) for the cache
		// would keep per-item state in memory for the life of the task, and make one cache row
		// of it: such a result is not cached.
		o.record = nil
		return
	}
	o.record.Children = append(o.record.Children, cachedChild{Child: nc.Child, From: nc.ProgressFrom, To: nc.ProgressTo})
}

// ResumeChildren implements [action.Resumer]. The skipped children are not recorded for the
// conversion cache, so a resumed attempt caches nothing.
func (o *output) ResumeChildren() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ordinal != 0 {
		return 0
	}
	n := 0
	for {
		// An error here only means fewer children are passed over: CreateChild compares
		// the others with what they were, and reports the error itself.
		if k, err := o.existing.at(o.ctx, n); err != nil || k == nil {
			break
		}
		n++
	}
	o.ordinal = n
	if n > 0 {
		o.record = nil
	}
	return n
}

// The calls below record into the attempt's result (engine.Effects), under o.mu: an action may
// call them from several goroutines.

func (o *output) SetText(_ context.Context, text string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.result.SetText(text)
	return nil
}

func (o *output) SetThumbnail(ctx context.Context, r io.Reader, contentType string) error {
	sha, _, err := o.w.cfg.Blobs.Put(ctx, r)
	if err != nil {
		return fmt.Errorf("store thumbnail: %w", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.result.SetThumbnail(sha, contentType)
	return nil
}

func (o *output) SetContentType(ct string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.result.SetContentType(ct)
}

func (o *output) SetMetadata(md map[string]any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.result.SetMetadata(md)
}

func (o *output) SetOutput(_ context.Context, kind string, value json.RawMessage) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.result.SetOutput(kind, value)
}

func (o *output) Write(w action.DomainWrite) error {
	dw, err := o.w.e.EncodeWrite(w)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.result.AddWrite(dw)
	return nil
}

func (o *output) Emit(events ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.result.Emit(events...)
}

func (o *output) Progress(f float64) {
	o.mu.Lock()
	more := f > o.progress && f <= 1
	if more {
		o.progress = f
	}
	o.mu.Unlock()
	if more {
		o.advance()
	}
}

// advance tells of a step of progress.
func (o *output) advance() {
	if o.advanced != nil {
		o.advanced()
	}
}

func (o *output) Heartbeat() {
	if o.beat != nil {
		o.beat()
	}
}

// earlier reads the children an earlier attempt recorded a page at a time, as the attempt
// reaches their ordinals (which only grow), instead of holding them all: a resumed unpack of an
// archive of 100,000 entries would otherwise keep 100,000 items in memory for its life.
type earlier struct {
	load   func(ctx context.Context, from, limit int) ([]*record.Item, error)
	page   []*record.Item // the children with ordinals from lo on, in ordinal order
	lo, hi int            // page covers ordinals [lo, hi); hi < 0: every one from lo on
}

// earlierPage is how many children [earlier] holds at once (a variable for the tests).
var earlierPage = 1000

// at returns the child recorded with ordinal ord, or nil. A nil *earlier has none.
func (e *earlier) at(ctx context.Context, ord int) (*record.Item, error) {
	if e == nil {
		return nil, nil
	}
	if ord < e.lo || (e.hi >= 0 && ord >= e.hi) {
		page, err := e.load(ctx, ord, earlierPage)
		if err != nil {
			return nil, fmt.Errorf("children of an earlier attempt: %w", err)
		}
		e.page, e.lo, e.hi = page, ord, -1
		if len(page) == earlierPage {
			e.hi = page[len(page)-1].Ordinal + 1
		}
	}
	i, found := slices.BinarySearchFunc(e.page, ord, func(k *record.Item, ord int) int { return k.Ordinal - ord })
	if !found {
		return nil, nil
	}
	return e.page[i], nil
}
