package web_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/fleet"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/workerproto"
)

// remoteWorker polls the test server for tasks of the remote action Pdf with the worker token,
// as `sluice worker --server` does, until the test ends.
func remoteWorker(t *testing.T, b *bundle) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := &workerproto.Client{Server: b.url + "/v1/workers", Token: b.worker}
		for ctx.Err() == nil {
			if _, err := c.Poll(ctx, "Pdf"); err != nil && ctx.Err() == nil {
				t.Errorf("poll: %v", err)
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// staleProcess registers an engine process that last wrote its row two minutes ago, as one
// killed then would have.
func staleProcess(t *testing.T, b *bundle) {
	t.Helper()
	r := fleet.New(fleet.Config{Store: b.n.Store, ID: "killed-owner", Name: "old-host (pid 99)",
		Now: func() time.Time { return time.Now().Add(-2 * time.Minute) }})
	if err := r.Beat(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestOperationsWorkers shows the remote workers' health on the operations page: this engine
// process and the remote worker polling it are connected, with the action it polls for; an
// engine process that stopped writing two minutes ago is flagged stale.
func TestOperationsWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	remoteWorker(t, b)
	staleProcess(t, b)
	c := b.client(t)
	c.signIn(b.reader)
	var rows []string
	poll.Until(t, 30*time.Second, "the remote worker on the operations page", func() (bool, string) {
		if err := b.n.Fleet.Beat(t.Context()); err != nil { // the register writes every 5 s; now
			t.Fatal(err)
		}
		_, page := c.do("GET", "/operations", nil, nil)
		rows = workerRows(page)
		return len(rows) == 3, strings.Join(rows, "\n")
	})
	var this, remote, killed string
	for _, r := range rows {
		switch {
		case strings.HasPrefix(r, "remote|"):
			remote = r
		case strings.Contains(r, "old-host"):
			killed = r
		default:
			this = r
		}
	}
	// Polls come one after another: between two, none waits.
	for _, w := range []string{"remote|sluice-worker (", "from 127.0.0.1 (token ", "|remote worker|Pdf|0", "|connected"} {
		if !strings.Contains(remote, w) {
			t.Errorf("the remote worker's row %q lacks %q", remote, w)
		}
	}
	if !strings.HasPrefix(this, "process|") || !strings.Contains(this, "|engine process|all|0|") || !strings.HasSuffix(this, "|connected") {
		t.Errorf("this process's row: %q", this)
	}
	if killed != "process stale|old-host (pid 99)|engine process|all|0|2m 00s ago|stale" {
		t.Errorf("the killed process's row: %q", killed)
	}
	// Its remote worker follows the process that serves it.
	if i := slices.Index(rows, this); i+1 >= len(rows) || rows[i+1] != remote {
		t.Errorf("the remote worker is not listed right after its process: %q", rows)
	}
}

// workerRows returns the operations page's worker rows as "KIND[ stale]|cell|cell…".
func workerRows(page string) []string {
	var out []string
	for _, m := range rowsRE.FindAllStringSubmatch(page, -1) {
		f := []string{m[2]}
		if strings.Contains(m[1], "stale") {
			f[0] += " stale"
		}
		for _, c := range cellsRE.FindAllStringSubmatch(m[3], -1) {
			f = append(f, strings.Join(strings.Fields(tagRE.ReplaceAllString(c[1], "")), " "))
		}
		out = append(out, strings.Join(f, "|"))
	}
	return out
}

var (
	rowsRE  = regexp.MustCompile(`(?s)<tr class="worker-row([^"]*)" data-kind="([a-z]+)">(.*?)</tr>`)
	cellsRE = regexp.MustCompile(`(?s)<td data-label="[^"]*">(.*?)</td>`)
)
