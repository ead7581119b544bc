package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/outbox"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/sink"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// drivertestSQLite opens the embedded store, for tests that are about sinks, not drivers.
func drivertestSQLite(tb testing.TB) store.Store { return drivertest.OpenSQLite(tb) }

// drivertestPostgres opens a Postgres store in a new schema (skipping without a database).
func drivertestPostgres(tb testing.TB) store.Store { return drivertest.OpenPostgres(tb) }

// recorder is a sink that keeps what it was sent, failing while down is set.
type recorder struct {
	mu   sync.Mutex
	down bool
	msgs []sink.Message
}

func (r *recorder) Send(_ context.Context, msgs []sink.Message) []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if r.down {
			errs[i] = errors.New("sink down")
			continue
		}
		r.msgs = append(r.msgs, m)
	}
	return errs
}

func (r *recorder) Close() error { return nil }

func (r *recorder) got() []sink.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sink.Message(nil), r.msgs...)
}

// setup starts an engine with the flaky action and an outbox relaying to sinks.
func setup(t *testing.T, open enginetest.Open, cfg outbox.Config) (*enginetest.Kit, *outbox.Outbox) {
	t.Helper()
	// flaky fails its first attempt on items whose name starts with "retry", and for good on
	// those starting with "bad".
	flaky := enginetest.Func("flaky", func(ctx context.Context, tk *action.Task, out action.Output) error {
		switch {
		case strings.HasPrefix(tk.Item.Name, "bad"):
			return action.Permanentf("bad input %s", tk.Item.Name)
		case strings.HasPrefix(tk.Item.Name, "retry") && tk.Attempt == 1:
			return errors.New("transient")
		}
		out.SetMetadata(map[string]any{"digest": "d-" + tk.Item.Name})
		return out.SetOutput(ctx, "result", json.RawMessage(`{"ok":true}`))
	})
	k := enginetest.Start(t, open, flaky)
	cfg.Store = k.Store
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff, cfg.MaxBackoff = 5*time.Millisecond, 50*time.Millisecond
	}
	cfg.PollInterval = 20 * time.Millisecond
	o := outbox.New(cfg)
	if err := o.Register(t.Context(), k.Engine); err != nil {
		t.Fatal(err)
	}
	o.Start(context.Background())
	t.Cleanup(o.Stop)
	return k, o
}

const flakyWorkflow = `name: pub
publish:
  - {sink: rec, on: [ok], subject: pub.done, context: Sheet}
steps:
  digest:
    action: flaky
    needs: [start]
    success: [ok]
    attempts: 2
    publish:
      - {sink: rec, keys: [row], attributes: {role: access}}
`

func roots(names ...string) []engine.Root {
	out := make([]engine.Root, len(names))
	for i, n := range names {
		out[i] = engine.Root{Ordinal: i, Name: n, Metadata: map[string]any{"row": i}}
	}
	return out
}

// TestPublishCommitsWithTask shows that a task's outcome is published once, from the attempt
// that ended the task — a retried attempt publishes nothing, a failure for good publishes a
// failed outcome — with the attributes its rule asks for, and that the relay deletes what
// the sink acknowledged. On both drivers.
func TestPublishCommitsWithTask(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		rec := &recorder{}
		k, o := setup(t, open, outbox.Config{Sinks: map[string]sink.Sink{"rec": rec}})
		job := k.StartJob(t, flakyWorkflow, roots("a", "retry-b", "bad-c")...)
		if j := k.WaitJob(t, job.ID, 30*time.Second); j.State != record.JobComplete {
			t.Fatalf("job %s: %s", j.State, j.Error)
		}
		// 3 step outcomes and 2 ok events (bad-c fails, so no ok).
		poll.Until(t, 10*time.Second, "5 messages", func() (bool, string) {
			return len(rec.got()) == 5, fmt.Sprint(len(rec.got()))
		})
		byID := map[string]sink.Message{}
		for _, m := range rec.got() {
			if _, dup := byID[m.ID]; dup {
				t.Fatalf("message %s delivered twice", m.ID)
			}
			byID[m.ID] = m
		}
		inst := o.Installation()
		want := map[string]string{ // id → status
			fmt.Sprintf("%s/j%d/i1/digest/complete/a1/r0", inst, job.ID): "ok",
			fmt.Sprintf("%s/j%d/i2/digest/complete/a2/r0", inst, job.ID): "ok",
			fmt.Sprintf("%s/j%d/i3/digest/failed/a1/r0", inst, job.ID):   "error",
			fmt.Sprintf("%s/j%d/i1/@ok/r0", inst, job.ID):                "ok",
			fmt.Sprintf("%s/j%d/i2/@ok/r0", inst, job.ID):                "ok",
		}
		for id, status := range want {
			m, ok := byID[id]
			if !ok {
				t.Fatalf("no message %s; got %v", id, keys(byID))
			}
			if m.Attributes["status"] != status {
				t.Errorf("%s: status %q, want %q", id, m.Attributes["status"], status)
			}
			var b outbox.Body
			if err := json.Unmarshal(m.Body, &b); err != nil || b.ID != id {
				t.Fatalf("%s: body %s: %v", id, m.Body, err)
			}
			if strings.Contains(id, "@ok") {
				if m.Subject != "pub.done" || m.Attributes["context"] != "Sheet" || m.Attributes["event"] != "ok" {
					t.Errorf("%s: subject %q attributes %v", id, m.Subject, m.Attributes)
				}
				continue
			}
			if m.Subject != "pub.digest" || m.Attributes["role"] != "access" || m.Attributes["action"] != "flaky" || m.Attributes["row"] == "" {
				t.Errorf("%s: subject %q attributes %v", id, m.Subject, m.Attributes)
			}
			if status == "ok" && (b.Metadata["digest"] == nil || string(b.Outputs["result"]) != `{"ok":true}`) {
				t.Errorf("%s: body lacks the task's metadata or outputs: %s", id, m.Body)
			}
			if status == "error" && !strings.Contains(b.Error, "bad input") {
				t.Errorf("%s: error %q", id, b.Error)
			}
		}
		poll.Until(t, 10*time.Second, "the outbox to be empty", func() (bool, string) {
			st, err := o.Status(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			return len(st) == 1 && st[0].Pending == 0 && st[0].Delivered == 5, fmt.Sprintf("%+v", st)
		})
	})
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestFullOutboxDropsWithoutBlocking shows that a sink that stays down does not block task
// commits: its outbox grows to MaxPending, then new messages are dropped, an error is logged
// and the metrics say so; once the sink is back, what was kept is delivered.
func TestFullOutboxDropsWithoutBlocking(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		rec := &recorder{down: true}
		var logs poll.Buffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		k, o := setup(t, open, outbox.Config{Sinks: map[string]sink.Sink{"rec": rec}, MaxPending: 4, Logger: log,
			CheckInterval: time.Hour}) // checked by hand below
		first := k.StartJob(t, flakyWorkflow, roots("a", "b", "c")...)
		if j := k.WaitJob(t, first.ID, 30*time.Second); j.State != record.JobComplete {
			t.Fatalf("job %s: %s", j.State, j.Error)
		}
		if err := o.Check(t.Context()); err != nil {
			t.Fatal(err)
		}
		second := k.StartJob(t, strings.Replace(flakyWorkflow, "name: pub", "name: pub2", 1), roots("d", "e")...)
		if j := k.WaitJob(t, second.ID, 30*time.Second); j.State != record.JobComplete {
			t.Fatalf("the job of a full outbox: %s: %s", j.State, j.Error)
		}
		// The relay reads a row once no transaction that could precede it is open on the
		// PostgreSQL server (other tests' too): wait for it to have tried.
		var st []outbox.SinkStatus
		poll.Until(t, 30*time.Second, "a failed delivery", func() (bool, string) {
			var err error
			if st, err = o.Status(t.Context()); err != nil {
				t.Fatal(err)
			}
			return len(st) == 1 && st[0].Failures > 0, fmt.Sprintf("%+v", st)
		})
		if len(st) != 1 || st[0].Pending != 6 || !st[0].Full || st[0].Dropped != 4 || st[0].Failures == 0 || st[0].LastError != "sink down" {
			t.Fatalf("status = %+v; want 6 pending (first job), full, 4 dropped (second job), failures", st)
		}
		if !strings.Contains(logs.String(), "outbox full") {
			t.Fatalf("no alert logged:\n%s", logs.String())
		}
		var metrics bytes.Buffer
		if err := o.WriteMetrics(t.Context(), &metrics); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`sluice_outbox_full{sink="rec"} 1`, `sluice_outbox_pending{sink="rec"} 6`, `sluice_outbox_dropped_total{sink="rec"} 4`} {
			if !strings.Contains(metrics.String(), want) {
				t.Errorf("metrics lack %s:\n%s", want, metrics.String())
			}
		}
		rec.mu.Lock()
		rec.down = false
		rec.mu.Unlock()
		poll.Until(t, 10*time.Second, "the kept messages delivered", func() (bool, string) {
			return len(rec.got()) == 6, fmt.Sprint(len(rec.got()))
		})
	})
}

// TestWebhookFlakyReceiver relays 300 outcomes to a webhook receiver that fails 30 % of
// requests with a 503 and lets 5 % time out — half of those after recording the message, as a
// receiver whose answer is lost would: every message arrives, none is lost, every duplicate
// has the same id and body, and every request is signed.
func TestWebhookFlakyReceiver(t *testing.T) {
	t.Parallel()
	const n = 300
	secret := "s3cret"
	var mu sync.Mutex
	seen := map[string][]byte{}
	dups, failed, timedOut, badSig := 0, 0, 0, 0
	rng := rand.New(rand.NewPCG(1, 2))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := r.Header.Get(sink.HeaderID)
		mu.Lock()
		if !sink.Verify([]byte(secret), body, r.Header.Get(sink.HeaderSignature)) {
			badSig++
		}
		roll := rng.Float64()
		recorded := roll >= 0.35 || roll >= 0.325 // success, or a timeout after recording
		if recorded {
			if prev, ok := seen[id]; ok {
				dups++
				if !bytes.Equal(prev, body) {
					t.Errorf("message %s redelivered with another body", id)
				}
			}
			seen[id] = body
		}
		mu.Unlock()
		switch {
		case roll < 0.30:
			mu.Lock()
			failed++
			mu.Unlock()
			http.Error(w, "try later", http.StatusServiceUnavailable)
		case roll < 0.35:
			mu.Lock()
			timedOut++
			mu.Unlock()
			<-r.Context().Done() // no answer: the client times out
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(srv.Close)
	hook, err := sink.Open(t.Context(), srv.URL+"/hook?secret="+secret, sink.Options{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	k, o := setup(t, drivertestSQLite, outbox.Config{Sinks: map[string]sink.Sink{"rec": hook}, BatchSize: 50})
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("f%03d", i)
	}
	wf := strings.Replace(flakyWorkflow, "  - {sink: rec, on: [ok], subject: pub.done, context: Sheet}\n", "", 1)
	wf = strings.Replace(wf, "publish:\nsteps", "steps", 1)
	job := k.StartJob(t, wf, roots(names...)...)
	if j := k.WaitJob(t, job.ID, 60*time.Second); j.State != record.JobComplete {
		t.Fatalf("job %s: %s", j.State, j.Error)
	}
	poll.Until(t, 60*time.Second, "every message delivered", func() (bool, string) {
		st, err := o.Status(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return len(st) == 1 && st[0].Pending == 0 && len(seen) == n, fmt.Sprintf("%d seen, status %+v", len(seen), st)
	})
	mu.Lock()
	defer mu.Unlock()
	if badSig > 0 {
		t.Errorf("%d requests with a bad signature", badSig)
	}
	if failed == 0 || timedOut == 0 {
		t.Errorf("the receiver was not flaky: %d failed, %d timed out", failed, timedOut)
	}
	t.Logf("%d messages; %d answered 503, %d timed out, %d duplicates (same id and body)", n, failed, timedOut, dups)
}
