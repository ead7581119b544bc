package workerproto_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/enginetest/testdomain"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/workerproto"
)

// TestRemoteDomainWrites: a remote worker's N.write.json fragments are committed with its task,
// to the test domain, once: a replayed N is ignored, the writes of a hand-out whose worker
// vanished are not committed, and the hand-out that completes the task writes each key once,
// by its attempt — per fragment POST and in a multipart stream.
func TestRemoteDomainWrites(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{idle: time.Second, testDomain: true})
	job := b.job(t, "input")
	write := func(key, v string) string {
		return `{"domain":"test","key":"` + key + `","payload":{"v":"` + v + `"}}`
	}
	th := b.poll(t)
	for _, f := range [][2]string{
		{"0.write.json", write("a", "1")}, {"1.write.json", write("b", "1")},
		{"1.write.json", write("b-replayed", "1")},
		{"0.json", childJSON("x")}, {"0.blob", "X"},
		{"2.write.json", write("c", "1")}, // a write may come between a child's fragments
	} {
		if err := th.Post(t.Context(), f[0], str(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	// The worker vanishes: nothing it wrote is committed (its task is not complete).
	th2 := b.poll(t)
	if th2.ID == th.ID {
		t.Fatal("re-handed task kept its id")
	}
	if rows, err := testdomain.Rows(t.Context(), b.db, job.ID); err != nil || len(rows) != 0 {
		t.Fatalf("rows of a hand-out that did not finish: %v %v", rows, err)
	}
	s := th2.Stream(t.Context())
	for _, f := range [][2]string{
		{"0.json", childJSON("x")}, {"0.blob", "X"},
		{"0.write.json", write("a", "2")}, {"1.write.json", write("b", "2")}, {"2.write.json", write("c", "2")},
		{"2.write.json", write("d", "replayed")}, // ignored: N not above the last write's
		{"done", ""},
	} {
		if err := s.Part(f[0], str(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A replay after done is drained and changes nothing.
	if got := status(t, http.MethodHead, th2.URL); got != http.StatusNotFound {
		t.Errorf("finished task answers HEAD %d", got)
	}
	if j := enginetest.WaitJob(t, b.e, job.ID, 10*time.Second); j.State != record.JobComplete {
		t.Fatalf("job %s (%s)", j.State, j.Error)
	}
	root := b.root(t, job)
	tasks, err := b.db.TaskListByItem(t.Context(), root.ID)
	if err != nil {
		t.Fatal(err)
	}
	var convert *record.Task
	for _, tk := range tasks {
		if tk.Step == "convert" {
			convert = tk
		}
	}
	if convert == nil || convert.State != record.TaskComplete || convert.Attempt != 2 {
		t.Fatalf("convert task %+v, want complete at attempt 2", convert)
	}
	rows, err := testdomain.Rows(t.Context(), b.db, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Key+"="+strings.ReplaceAll(r.Payload, " ", ""))
		if r.ItemID != root.ID || r.Step != "convert" || r.TaskID != convert.ID || r.Attempt != 2 {
			t.Errorf("row %+v: want written by attempt 2 of task %d on item %d", r, convert.ID, root.ID)
		}
	}
	if want := `a={"v":"2"},b={"v":"2"},c={"v":"2"}`; strings.Join(got, ",") != want {
		t.Errorf("rows %s, want %s", strings.Join(got, ","), want)
	}
}

// TestRemoteDomainWriteErrors: a write that cannot be applied ends the task with a step error
// naming the fragment and the reason, and none of its writes are committed.
func TestRemoteDomainWriteErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{idle: time.Second, testDomain: true})
	for _, tc := range []struct {
		name, body, want string
	}{
		{"unknown domain", `{"domain":"nope","key":"k","payload":1}`, `step error: 1.write.json: write "k" to domain "nope": no such domain is registered`},
		{"no key", `{"domain":"test","payload":1}`, `step error: 1.write.json: write JSON: missing or empty field "key"`},
		{"not JSON", `{"domain":`, `step error: 1.write.json: write JSON: unexpected end of JSON input`},
		{"refused by the domain", `{"domain":"test","key":"fail"}`, `testdomain refuses key "fail"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := b.job(t, "input")
			th := b.poll(t)
			for _, f := range [][2]string{{"0.write.json", `{"domain":"test","key":"ok","payload":null}`}, {"1.write.json", tc.body}, {"done", ""}} {
				if err := th.Post(t.Context(), f[0], str(f[1])); err != nil {
					t.Fatal(err)
				}
			}
			enginetest.WaitJob(t, b.e, job.ID, 10*time.Second)
			root := b.root(t, job)
			if !strings.Contains(root.Error, tc.want) {
				t.Errorf("item error %q, want it to contain %q", root.Error, tc.want)
			}
			if rows, err := testdomain.Rows(t.Context(), b.db, job.ID); err != nil || len(rows) != 0 {
				t.Errorf("rows of a failed task: %v %v", rows, err)
			}
		})
	}
}

// multipartCounter counts the multipart POSTs a remote worker sends.
type multipartCounter struct{ n atomic.Int64 }

func (c *multipartCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
		c.n.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestRunBuiltinWrites: a built-in action run by a remote worker ([workerproto.RunBuiltin])
// sends its domain writes while it runs, in batches (N.write.json parts of multipart POSTs), not
// all in its result: after 2,000 writes of 250 bytes, at least one batch has gone. A write too
// large for an N.write.json (over 1 MiB) goes in result.json with the writes after it, which
// the server commits after the ones sent: every write is committed once, in the order made (the
// first write of a key wins, so "dup" keeps the value written first).
func TestRunBuiltinWrites(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{idle: 10 * time.Second, testDomain: true})
	job := b.job(t, "input")
	counter := &multipartCounter{}
	pad := strings.Repeat("p", 220)
	big := strings.Repeat("b", 3<<19) // 1.5 MiB
	var sentEarly atomic.Int64
	act := enginetest.Func("Pdf", func(ctx context.Context, task *action.Task, out action.Output) error {
		w := func(key string, v any) error {
			return out.Write(action.DomainWrite{Domain: testdomain.Name, Key: key, Payload: v})
		}
		for i := range 3000 {
			if err := w(fmt.Sprintf("r%04d", i), map[string]string{"pad": pad}); err != nil {
				return err
			}
			if i == 1999 {
				sentEarly.Store(counter.n.Load())
			}
		}
		for _, kv := range [][2]string{{"dup", "1"}, {"big", big}, {"dup", "2"}, {"after", "1"}} {
			if err := w(kv[0], map[string]string{"v": kv[1]}); err != nil {
				return err
			}
		}
		return nil
	})
	cat := &action.Catalog{}
	cat.Register(act)
	errc := make(chan error, 1)
	go func() {
		errc <- workerproto.RunBuiltin(t.Context(), workerproto.BuiltinConfig{Action: "Pdf", Catalog: cat, Once: true,
			TempDir: t.TempDir(), Client: &workerproto.Client{Server: b.base, HTTP: &http.Client{Transport: counter}}})
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if j := enginetest.WaitJob(t, b.e, job.ID, 30*time.Second); j.State != record.JobComplete {
		t.Fatalf("job %s (%s)", j.State, j.Error)
	}
	if sentEarly.Load() == 0 {
		t.Error("no batch of writes sent after 2,000 writes of 250 bytes: the worker holds them")
	}
	rows, err := testdomain.Rows(t.Context(), b.db, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r.Key] = strings.ReplaceAll(r.Payload, " ", "")
	}
	if len(rows) != 3003 || len(got) != 3003 {
		t.Fatalf("%d rows, %d keys; want 3,003", len(rows), len(got))
	}
	for i := range 3000 {
		if k := fmt.Sprintf("r%04d", i); got[k] != `{"pad":"`+pad+`"}` {
			t.Fatalf("row %s: %.40q", k, got[k])
		}
	}
	if got["dup"] != `{"v":"1"}` || got["after"] != `{"v":"1"}` || got["big"] != `{"v":"`+big+`"}` {
		t.Errorf("dup %s, after %s, big of %d bytes; want the first dup, after, and big whole", got["dup"], got["after"], len(got["big"]))
	}
	t.Logf("%d multipart POSTs, %d of them by the 2,000th write", counter.n.Load(), sentEarly.Load())
}
