// Package fleet keeps the register of what runs tasks — the engine processes sharing a
// database (`sluice serve`, `sluice worker --database`) and the remote workers speaking the
// worker protocol to them (`sluice worker --server`, or a worker in any language) — so that any
// process can show which are connected, when each was last heard from, the actions it serves,
// its tasks in flight, and which went quiet.
//
// Each engine process writes its own row, and one per remote worker it serves, every
// [Config.Interval] ([Register.Beat]). A row carries the time after which it is stale: a process
// that stopped writing (killed, stuck, cut off from the database) is flagged, as is a remote
// worker that has not polled or touched a task for [RemoteQuiet]. Stale rows are deleted an hour
// later; a process that stops cleanly deletes its rows.
package fleet

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workerproto"
)

// DomainName is the name the register's table is registered under.
const DomainName = "fleet"

// Kinds of members.
const (
	KindProcess = "process" // an engine process
	KindRemote  = "remote"  // a worker protocol client
)

// RemoteQuiet is how long a remote worker may go without a request before it is stale: a
// worker long-polls, so one that is connected is heard from at least every long poll (15s by
// default).
const RemoteQuiet = time.Minute

// forget is how long a stale row is kept before it is deleted.
const forget = time.Hour

//go:embed migrations
var migrations embed.FS

// Config configures a [Register].
type Config struct {
	Store  store.Store
	Logger *slog.Logger
	// ID names this process in the register: its worker's lease owner, so that the register
	// and the tasks' leases agree. Required.
	ID string
	// Name is what people read. Defaults to "HOST (pid N)".
	Name string
	// Actions are the actions this process's worker runs; empty means every action.
	Actions []string
	// InFlight returns the number of tasks this process's worker holds. Nil counts none.
	InFlight func() int
	// Interval is how often the rows are written. Defaults to 5s; a row is stale after three
	// intervals without a write.
	Interval time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Register writes this process's rows. Create it with [New], [Register.Register] it with the
// engine, Start and Stop it. It is safe for concurrent use.
type Register struct {
	cfg     Config
	log     *slog.Logger
	started time.Time

	mu      sync.Mutex
	remotes func() []workerproto.RemoteClient

	startOnce, stopOnce sync.Once
	cancel              context.CancelFunc
	done                chan struct{}
}

// New returns a register; it panics without cfg.Store or cfg.ID (a wiring mistake).
func New(cfg Config) *Register {
	if cfg.Store == nil || cfg.ID == "" {
		panic("fleet: Config needs Store and ID")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Name == "" {
		host, _ := os.Hostname()
		cfg.Name = fmt.Sprintf("%s (pid %d)", host, os.Getpid())
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Register{cfg: cfg, log: cfg.Logger, started: cfg.Now().UTC()}
}

// Register creates the register's table (a domain's migrations).
func (r *Register) Register(ctx context.Context, e *engine.Engine) error {
	return e.RegisterDomain(ctx, DomainName, domain{})
}

// ServeRemotes makes the register write the remote workers f returns (a worker protocol
// server's [workerproto.Server.Clients]) as served by this process.
func (r *Register) ServeRemotes(f func() []workerproto.RemoteClient) {
	r.mu.Lock()
	r.remotes = f
	r.mu.Unlock()
}

// Start writes the rows now and every Interval until Stop. Calling it again does nothing.
func (r *Register) Start(ctx context.Context) {
	r.startOnce.Do(func() {
		ctx, r.cancel = context.WithCancel(ctx)
		r.done = make(chan struct{})
		go func() {
			defer close(r.done)
			t := time.NewTicker(r.cfg.Interval)
			defer t.Stop()
			for {
				if err := r.Beat(ctx); err != nil && ctx.Err() == nil {
					r.log.Warn("fleet register", "error", err)
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	})
}

// Stop stops writing and deletes this process's rows. It is idempotent.
func (r *Register) Stop() {
	r.stopOnce.Do(func() {
		if r.cancel == nil {
			return
		}
		r.cancel()
		<-r.done
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := membersIn(r.cfg.Store).deleteOwn(ctx, r.cfg.ID); err != nil {
			r.log.Warn("fleet register: delete this process's rows", "error", err)
		}
	})
}

// Beat writes this process's row and its remote workers' rows once, and deletes rows stale for
// an hour.
func (r *Register) Beat(ctx context.Context) error {
	now := r.cfg.Now().UTC()
	staleAt := now.Add(3 * r.cfg.Interval)
	inFlight := 0
	if r.cfg.InFlight != nil {
		inFlight = r.cfg.InFlight()
	}
	r.mu.Lock()
	remotesOf := r.remotes
	r.mu.Unlock()
	var remotes []workerproto.RemoteClient
	if remotesOf != nil {
		remotes = remotesOf()
	}
	return r.cfg.Store.InTx(ctx, func(tx store.Executor) error {
		ms := membersIn(tx)
		if err := ms.put(ctx, memberRow{id: r.cfg.ID, kind: KindProcess, name: r.cfg.Name, actions: r.cfg.Actions, inFlight: inFlight,
			started: r.started, seen: now, staleAt: staleAt}); err != nil {
			return fmt.Errorf("write this process's row: %w", err)
		}
		if err := ms.deleteVia(ctx, r.cfg.ID); err != nil {
			return err
		}
		for _, c := range remotes {
			name := c.Agent
			if name == "" {
				name = "a worker"
			}
			name += " from " + c.Addr + " (token " + c.TokenID + ")"
			// Stale once quiet for RemoteQuiet, or when this process stops vouching for it.
			stale := c.Seen.Add(RemoteQuiet)
			if c.Polling > 0 {
				stale = now.Add(RemoteQuiet)
			}
			if stale.After(staleAt) {
				stale = staleAt
			}
			if err := ms.put(ctx, memberRow{id: r.cfg.ID + " " + c.ID, kind: KindRemote, name: name, via: r.cfg.ID, actions: c.Actions,
				inFlight: c.InFlight, polling: c.Polling, seen: c.Seen, staleAt: stale}); err != nil {
				return fmt.Errorf("write a remote worker's row: %w", err)
			}
		}
		return ms.deleteStale(ctx, now.Add(-forget))
	})
}

// Member is one row of the register.
type Member struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Via is the id of the process a remote worker talks to.
	Via string `json:"via,omitempty"`
	// Actions are those it serves; empty for a process that runs every action.
	Actions  []string `json:"actions"`
	InFlight int      `json:"in_flight"`
	// Polling is the number of a remote worker's polls waiting for a task.
	Polling int `json:"polling"`
	// Started is when the process started (zero for a remote worker); Seen its last contact.
	Started time.Time `json:"started,omitzero"`
	Seen    time.Time `json:"seen"`
	// Stale says it has not been heard from for too long: the process died or is stuck, or the
	// remote worker went away. Its tasks return to their queue when their leases expire.
	Stale bool `json:"stale"`
}

// List returns the register in db as of now: processes first, each followed by its remote
// workers.
func List(ctx context.Context, db DomainDB, now time.Time) ([]Member, error) {
	rows, err := membersIn(db).list(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the fleet register: %w", err)
	}
	out := make([]Member, len(rows))
	for i, m := range rows {
		out[i] = Member{ID: m.id, Kind: m.kind, Name: m.name, Via: m.via, Actions: m.actions, InFlight: m.inFlight, Polling: m.polling,
			Started: m.started, Seen: m.seen, Stale: now.After(m.staleAt)}
	}
	// A process, then its remote workers; processes by name.
	group := func(m Member) string {
		if m.Kind == KindRemote {
			return m.Via
		}
		return m.ID
	}
	names := map[string]string{}
	for _, m := range out {
		if m.Kind == KindProcess {
			names[m.ID] = m.Name
		}
	}
	slices.SortFunc(out, func(a, b Member) int {
		if c := strings.Compare(names[group(a)]+" "+group(a), names[group(b)]+" "+group(b)); c != 0 {
			return c
		}
		if a.Kind != b.Kind {
			return strings.Compare(a.Kind, b.Kind) // process before remote
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// domain gives the register's table to the engine's domain registry; it takes no writes.
type domain struct{}

func (domain) Migrations(d store.Dialect) []store.DomainMigration { return Migrations(d) }

// Migrations returns the register table's migrations in the dialect.
func Migrations(d store.Dialect) []store.DomainMigration {
	return store.MustDomainMigrations(migrations, "migrations", d)
}

func (domain) Apply(context.Context, store.DomainSQL, []engine.DomainWrite) error {
	return errors.New("the fleet register takes no domain writes")
}
