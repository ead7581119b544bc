package workerproto_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/workerproto"
)

// portPost posts args to a read endpoint of a task and returns the status and the body.
func portPost(t *testing.T, url, args string) (int, []byte) {
	t.Helper()
	return portDo(t, http.MethodPost, url, strings.NewReader(args))
}

// portGet gets a port endpoint of a task.
func portGet(t *testing.T, url string) (int, []byte) {
	t.Helper()
	return portDo(t, http.MethodGet, url, nil)
}

func portDo(t *testing.T, method, url string, body io.Reader) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, url, body)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestPortScopedToJob: the read port a task's URL serves reads the task's job only — a remote
// worker holding a task of one job lists that job's items alone, and gets nothing of another
// job's items (their children, their steps) however it names them; once the task ends, the
// port answers 404.
func TestPortScopedToJob(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	other := b.job(t, "another job's input")
	th := b.poll(t)
	for _, f := range [][2]string{{"0.json", childJSON("secret.pdf")}, {"0.blob", "secret"}, {"done", ""}} {
		if err := th.Post(t.Context(), f[0], str(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	if j := enginetest.WaitJob(t, b.e, other.ID, 10*time.Second); j.State != record.JobComplete {
		t.Fatalf("job %s (%s)", j.State, j.Error)
	}
	otherRoot := b.root(t, other)
	// What the engine holds of the other job, unscoped: what the port must not give.
	if kids, err := b.e.StepChildren(t.Context(), otherRoot.ID, "convert"); err != nil || len(kids) != 1 {
		t.Fatalf("the other job's children: %v %v", kids, err)
	}
	if steps, err := b.e.ItemSteps(t.Context(), other.ID, otherRoot.ID); err != nil || steps[1].State != record.TaskComplete {
		t.Fatalf("the other job's steps: %+v %v", steps, err)
	}

	mine := b.job(t, "my input")
	th = b.poll(t)
	var at workerproto.ActionTask
	if code, body := portGet(t, th.URL+"/task"); code != 200 || json.Unmarshal(body, &at) != nil || at.JobID != mine.ID {
		t.Fatalf("GET task: %d %s", code, body)
	}
	code, body := portPost(t, th.URL+"/core/job_items", `{}`)
	var items []*record.Item
	if code != 200 || json.Unmarshal(body, &items) != nil || len(items) != 1 || items[0].JobID != mine.ID {
		t.Errorf("job_items: %d %s, want the task's job's one item", code, body)
	}
	code, body = portPost(t, th.URL+"/core/step_children", `{"parent": `+jsonInt(otherRoot.ID)+`, "step": "convert"}`)
	if code != 200 || strings.TrimSpace(string(body)) != "[]" {
		t.Errorf("step_children of another job's item: %d %s, want none", code, body)
	}
	code, body = portPost(t, th.URL+"/core/item_steps", `{"item_id": `+jsonInt(otherRoot.ID)+`}`)
	if code != 200 || strings.Contains(string(body), string(record.TaskComplete)) {
		t.Errorf("item_steps of another job's item: %d %s, want no task state", code, body)
	}
	if code, body = portPost(t, th.URL+"/read/objects/rows", `false`); code != 400 || !strings.Contains(string(body), "bad_read") {
		t.Errorf("a read of a domain not registered: %d %s, want 400 bad_read", code, body)
	}
	if code, body = portPost(t, th.URL+"/core/nope", `{}`); code != 400 || !strings.Contains(string(body), "bad_read") {
		t.Errorf("an unknown core read: %d %s, want 400 bad_read", code, body)
	}
	if err := th.Post(t.Context(), "error", str("done with it")); err != nil {
		t.Fatal(err)
	}
	if code, _ := portPost(t, th.URL+"/core/job_items", `{}`); code != 404 {
		t.Errorf("job_items of an ended task: %d, want 404", code)
	}
	if code, _ := portPost(t, b.base+"/Pdf/00000000-0000-4000-8000-000000000000/core/job_items", `{}`); code != 404 {
		t.Errorf("job_items of an unknown task id: %d, want 404", code)
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestResultErrors: a result.json that cannot be applied fails the task for good with a step
// error naming the reason; an action's error travels with its class (a retryable one is retried).
func TestResultErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, payload, want string }{
		{"not JSON", `{`, "step error: result.json: not valid JSON: it ends before its value does"},
		{"not JSON at all", `{"children": x}`, "step error: result.json: not valid JSON at byte 14"},
		{"a field of the wrong kind", `{"children": "x"}`, `step error: result.json: field "children" holds a JSON string, which it cannot`},
		{"a child's blob not stored", `{"children":[{"name":"x","ordinal":0,"sha256":"` + strings.Repeat("ab", 32) + `"}]}`,
			"step error: result.json: child 0: blob " + strings.Repeat("ab", 32) + " is not in the blob store"},
		{"a write to no domain", `{"writes":[{"domain":"nope","key":"k"}]}`,
			`step error: result.json: write 0: write "k" to domain "nope": no such domain is registered`},
		{"children out of order", `{"children":[{"name":"a","ordinal":1},{"name":"b","ordinal":1}]}`,
			"step error: result.json: child 1: ordinal 1 not above the previous child's"},
		{"the action's permanent error", `{"error":{"message":"bad input","permanent":true}}`, "bad input"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, opts{attempts: 1})
			job := b.job(t, "input")
			th := b.poll(t)
			if err := th.Post(t.Context(), "result.json", str(c.payload)); err != nil {
				t.Fatal(err)
			}
			j := enginetest.WaitJob(t, b.e, job.ID, 10*time.Second)
			if it := b.root(t, job); !strings.HasPrefix(it.Error, c.want) {
				t.Errorf("item error %q (job %s), want it to start with %q", it.Error, j.State, c.want)
			}
			if kids := b.children(t, b.root(t, job)); len(kids) != 0 {
				t.Errorf("%d children committed", len(kids))
			}
		})
	}
}

// TestRunBuiltinUnknownAction: a remote worker asked to run a built-in action its process does not
// have refuses at once, naming the action and those it has.
func TestRunBuiltinUnknownAction(t *testing.T) {
	t.Parallel()
	cat := &action.Catalog{}
	cat.Register(route{}, workerproto.RemoteAction())
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for _, name := range []string{"nope", "remote"} {
		err := workerproto.RunBuiltin(ctx, workerproto.BuiltinConfig{Server: "http://127.0.0.1:1/v1/workers", Action: name, Catalog: cat})
		if !errors.Is(err, workerproto.ErrUnknownAction) || !strings.Contains(err.Error(), `"`+name+`"`) ||
			!strings.Contains(err.Error(), "route") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestPortArgsBounded: a read's arguments over 1 MiB are refused (400) without being read.
func TestPortArgsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	b.job(t, "input")
	th := b.poll(t)
	big := `{"after": "` + strings.Repeat("x", 1<<20) + `"}`
	if code, body := portPost(t, th.URL+"/core/job_items", big); code != 400 || !strings.Contains(string(body), "over 1048576 bytes") {
		t.Errorf("arguments over 1 MiB: %d %s", code, body)
	}
	if code, _ := portPost(t, th.URL+"/core/job_items", `{}`); code != 200 {
		t.Errorf("the task's port after a refused read: %d", code)
	}
}
