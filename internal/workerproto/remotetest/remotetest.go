// Package remotetest runs built-in actions on remote workers in a test: a worker protocol server
// on a test kit's engine (internal/enginetest), which hands the actions' tasks out, and, in the
// same process, one remote runner per action ([workerproto.RunBuiltin]) with a catalog of its
// own, reading through its tasks' read ports over HTTP — as `sluice serve --remote NAME` and
// `sluice worker --action NAME` do across machines.
package remotetest

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/workerproto"
)

// Route returns the engine configuration hook ([enginetest.Config.Engine]) that sends the tasks
// of the actions to remote workers: the queues "remote:<name>".
func Route(names ...string) func(*engine.Config) {
	return func(c *engine.Config) {
		if c.Remote == nil {
			c.Remote = map[string]bool{}
		}
		for _, n := range names {
			c.Remote[n] = true
		}
	}
}

// Remote is a worker protocol server with a remote runner per action.
type Remote struct {
	Server *workerproto.Server
	// URL is the poll URL base.
	URL string
	ran map[string]*atomic.Int64
}

// Ran returns how many tasks of the action the remote runners ran.
func (r *Remote) Ran(name string) int64 {
	if c := r.ran[name]; c != nil {
		return c.Load()
	}
	return 0
}

// counted wraps an action, counting its runs.
type counted struct {
	action.Action
	n *atomic.Int64
}

func (c counted) Policy() action.Policy {
	if p, ok := c.Action.(interface{ Policy() action.Policy }); ok {
		return p.Policy()
	}
	return action.Policy{}
}

func (c counted) Run(ctx context.Context, t *action.Task, out action.Output) error {
	c.n.Add(1)
	return c.Action.Run(ctx, t, out)
}

// Serve starts a worker protocol server on the kit's engine (whose configuration routed the
// actions named to remote workers, see [Route]) and, for each name, `runners` remote runners
// of the action from remote, a catalog of this "remote process" (not the kit's: the runners share
// nothing with the engine but HTTP). Everything stops when t ends.
func Serve(t testing.TB, k *enginetest.Kit, remote []action.Action, runners int, names ...string) *Remote {
	t.Helper()
	srv := workerproto.New(workerproto.Config{Backend: workerproto.NewBackend(k.Engine, k.Blobs, k.Worker),
		LongPoll: 2 * time.Second, PollInterval: 20 * time.Millisecond, IdleTimeout: 30 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	srv.Start(ctx)
	hs := httptest.NewServer(srv.Handler())
	r := &Remote{Server: srv, URL: hs.URL + "/v1/workers", ran: map[string]*atomic.Int64{}}
	cat := &action.Catalog{}
	for _, a := range remote {
		n := &atomic.Int64{}
		r.ran[a.Spec().Name] = n
		cat.Register(counted{a, n})
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(names)*runners)
	for _, name := range names {
		for range runners {
			tmp := t.TempDir()
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := workerproto.RunBuiltin(ctx, workerproto.BuiltinConfig{Server: r.URL, Action: name, Catalog: cat,
					TempDir: tmp, Heartbeat: time.Second})
				if err != nil && !errors.Is(err, context.Canceled) {
					errs <- err
				}
			}()
		}
	}
	t.Cleanup(func() {
		cancel()
		hs.CloseClientConnections()
		hs.Close()
		srv.Stop()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("remote runner: %v", err)
		}
	})
	return r
}
