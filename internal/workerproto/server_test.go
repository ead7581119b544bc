package workerproto_test

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workerproto"
)

func TestTaskJSONAndBlob(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	job := b.job(t, "hello pdf")
	th := b.poll(t)
	if !strings.HasPrefix(th.URL, b.http.URL+"/v1/workers/Pdf/") || th.Blob.URL != th.URL+"/blob" {
		t.Errorf("urls: %q %q", th.URL, th.Blob.URL)
	}
	sum := sha1.Sum([]byte("hello pdf"))
	if th.Filename != "in0.pdf" || th.ContentType != "application/pdf" || th.LanguageCode != "en" || th.Blob.NBytes != 9 ||
		th.Blob.SHA1 != hex.EncodeToString(sum[:]) || len(th.ID) != 36 {
		t.Errorf("task %+v", th.Task)
	}
	rc, err := th.OpenBlob(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	if string(data) != "hello pdf" {
		t.Errorf("blob %q", data)
	}
	// The blob is a document's bytes: inert should a browser open the URL.
	resp, err := http.Get(th.Blob.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if h := resp.Header; h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Content-Security-Policy") != "sandbox; default-src 'none'" ||
		h.Get("Content-Disposition") != "attachment" || h.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("blob headers %v", h)
	}
	resp, err = http.Get(th.URL)
	if err != nil {
		t.Fatal(err)
	}
	var again workerproto.Task
	json.NewDecoder(resp.Body).Decode(&again)
	resp.Body.Close()
	if resp.StatusCode != 200 || again.ID != th.ID || again.URL != th.URL {
		t.Errorf("GET task: %d %+v", resp.StatusCode, again)
	}
	if got := status(t, http.MethodHead, th.URL); got != 200 {
		t.Errorf("HEAD = %d", got)
	}
	if got := status(t, http.MethodHead, b.base+"/Pdf/00000000-0000-4000-8000-000000000000"); got != 404 {
		t.Errorf("HEAD unknown = %d", got)
	}
	if got := status(t, http.MethodHead, b.base+"/Office/"+th.ID); got != 404 {
		t.Errorf("HEAD under another action = %d", got)
	}
	if err := th.Post(t.Context(), "done", nil); err != nil {
		t.Fatal(err)
	}
	if j := enginetest.WaitJob(t, b.e, job.ID, 10*time.Second); j.State != record.JobComplete {
		t.Errorf("job %s", j.State)
	}
	if got := status(t, http.MethodHead, th.URL); got != 404 {
		t.Errorf("HEAD after done = %d", got)
	}
	// After done, fragments are drained and answered 202.
	if err := th.Post(t.Context(), "heartbeat", str("x")); err != nil {
		t.Errorf("fragment after done: %v", err)
	}
}

func TestLongPollTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{longPoll: 200 * time.Millisecond})
	start := time.Now()
	if got := rawPost(t, b.base+"/Pdf", "text/plain", nil); got != http.StatusNoContent {
		t.Errorf("poll = %d, want 204", got)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("answered after %s, before the long-poll period", d)
	}
}

// convert sends a typical conversion: two children with every payload kind, progress between.
func convert(t *testing.T, send func(name, body string) error) {
	t.Helper()
	for _, f := range [][2]string{
		{"progress", `{"children":{"nProcessed":0,"nTotal":2}}`},
		{"0.json", childJSON("in0.pdf/p1.pdf")},
		{"0.blob", "child zero"},
		{"0.txt", "text zero"},
		{"0-thumbnail.png", "png bytes"},
		{"heartbeat", ""},
		{"progress", `{"bytes":{"nProcessed":5000000000,"nTotal":10000000000}}`},
		{"1.json", childJSON("in0.pdf/p2.pdf")},
		{"1-thumbnail.jpg", "jpg bytes"},
		{"1.blob", "child one"},
		{"1.blob", "ignored second blob"},
		{"progress", "0.75"},
		{"progress", "NaN"}, // ignored with a warning
		{"done", ""},
	} {
		if err := send(f[0], f[1]); err != nil {
			t.Fatalf("%s: %v", f[0], err)
		}
	}
}

func checkConverted(t *testing.T, b *bundle, job *record.Job) {
	t.Helper()
	if j := enginetest.WaitJob(t, b.e, job.ID, 20*time.Second); j.State != record.JobComplete {
		t.Fatalf("job %s: %s", j.State, j.Error)
	}
	root := b.root(t, job)
	kids := b.children(t, root)
	if root.Error != "" || root.NChildren != 2 || len(kids) != 2 {
		t.Fatalf("root %+v, %d children", root, len(kids))
	}
	k0, k1 := kids[0], kids[1]
	if k0.Name != "in0.pdf/p1.pdf" || b.blobText(t, k0.BlobSHA256) != "child zero" || k0.Text != "text zero" ||
		k0.ThumbnailType != "image/png" || b.blobText(t, k0.ThumbnailSHA) != "png bytes" || !strings.Contains(string(k0.Metadata), `"k":"v"`) {
		t.Errorf("child 0: %+v", k0)
	}
	if k1.Name != "in0.pdf/p2.pdf" || b.blobText(t, k1.BlobSHA256) != "child one" || k1.HasText || k1.ThumbnailType != "image/jpeg" {
		t.Errorf("child 1: %+v", k1)
	}
	if !strings.Contains(string(k0.Options), `"lang":"en"`) {
		t.Errorf("child options %s", k0.Options)
	}
	p, err := b.e.Progress(t.Context(), job.ID)
	if err != nil || p.Fraction != 1 {
		t.Errorf("progress %+v %v", p, err)
	}
}

func TestPerFragmentPOSTs(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	job := b.job(t, "input")
	th := b.poll(t)
	convert(t, func(name, body string) error { return th.Post(t.Context(), name, str(body)) })
	checkConverted(t, b, job)
}

func TestMultipartStream(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	job := b.job(t, "input")
	th := b.poll(t)
	s := th.Stream(t.Context())
	convert(t, func(name, body string) error { return s.Part(name, str(body)) })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkConverted(t, b, job)
}

// TestMultipartLeniency sends the bytes real converters send: unquoted and quoted names, no or
// odd part content types, a bare CRLF preamble, a quoted boundary, chunked encoding and a close
// delimiter without CRLF.
func TestMultipartLeniency(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	job := b.job(t, "input")
	th := b.poll(t)
	const bd = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789aBcDeFgHiJkLmN"
	body := "\r\n--" + bd + "\r\nContent-Disposition: form-data; name=progress\r\n\r\n0.5" +
		"\r\n--" + bd + "\r\nContent-Disposition: form-data; name=0.json\r\nContent-Type: application/x-whatever\r\n\r\n" + childJSON("in0.pdf/x.pdf") +
		"\r\n--" + bd + "\r\nContent-Disposition: form-data; name=\"0.blob\"\r\n\r\nblob bytes" +
		"\r\n--" + bd + "\r\nContent-Disposition: form-data; name=0.txt\r\n\r\nsome text" +
		"\r\n--" + bd + "\r\nContent-Disposition: form-data; name=done\r\n\r\n" +
		"\r\n--" + bd + "--"
	pr, pw := io.Pipe()
	go func() { pw.Write([]byte(body)); pw.Close() }() // no Content-Length: chunked
	if got := rawPost(t, th.URL, `multipart/form-data; boundary="`+bd+`"`, pr); got != http.StatusAccepted {
		t.Fatalf("multipart = %d", got)
	}
	enginetest.WaitJob(t, b.e, job.ID, 10*time.Second)
	kids := b.children(t, b.root(t, job))
	if len(kids) != 1 || kids[0].Text != "some text" || b.blobText(t, kids[0].BlobSHA256) != "blob bytes" {
		t.Errorf("children %+v", kids)
	}
	// A task POST that is neither multipart nor a fragment is refused.
	if got := rawPost(t, th.URL, "text/plain", str("x")); got != http.StatusUnsupportedMediaType {
		t.Errorf("non-multipart = %d", got)
	}
}

func TestOrderingErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	tests := []struct {
		name  string
		frags [][2]string
		want  string
	}{
		{"payload in start", [][2]string{{"0.blob", "x"}}, "logic error in Pdf: unexpected fragment 0.blob before a child header"},
		{"text in start", [][2]string{{"0.txt", "x"}}, "logic error in Pdf: unexpected fragment 0.txt"},
		{"child without blob", [][2]string{{"0.json", childJSON("a")}, {"done", ""}}, "logic error in Pdf: tried to write child without blob data"},
		{"next header without blob", [][2]string{{"0.json", childJSON("a")}, {"1.json", childJSON("b")}}, "logic error in Pdf: tried to write child without blob data"},
		{"inherit on child 1", [][2]string{{"0.json", childJSON("a")}, {"inherit-blob", ""}, {"1.json", childJSON("b")}, {"inherit-blob", ""}},
			"logic error in Pdf: tried to inherit blob when child index != 0"},
		{"bad json", [][2]string{{"0.json", "{not json"}}, "step error: child JSON"},
		{"missing field", [][2]string{{"0.json", `{"filename":"a","contentType":"x","languageCode":"en","metadata":{},"wantOcr":false}`}}, `step error: child JSON: missing field "wantSplitByPage"`},
		{"unknown fragment", [][2]string{{"0.pdf", "x"}}, "step error: unrecognized fragment 0.pdf"},
		{"nine digits", [][2]string{{"123456789.json", childJSON("a")}}, "step error: unrecognized fragment 123456789.json"},
		{"error fragment", [][2]string{{"0.json", childJSON("a")}, {"0.blob", "x"}, {"1.json", childJSON("b")}, {"error", "password protected"}}, "password protected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := b.job(t, "input")
			th := b.poll(t)
			for _, f := range tt.frags {
				if err := th.Post(t.Context(), f[0], str(f[1])); err != nil {
					t.Fatalf("%s: %v", f[0], err)
				}
			}
			enginetest.WaitJob(t, b.e, job.ID, 10*time.Second)
			root := b.root(t, job)
			if !strings.HasPrefix(root.Error, tt.want) {
				t.Errorf("item error %q, want prefix %q", root.Error, tt.want)
			}
			if tt.name == "error fragment" {
				// The unfinished child is discarded, earlier children stay.
				if kids := b.children(t, root); len(kids) != 1 || kids[0].Name != "a" {
					t.Errorf("children %+v", kids)
				}
			}
			if got := status(t, http.MethodHead, th.URL); got != 404 {
				t.Errorf("HEAD after end = %d", got)
			}
		})
	}
}

// TestReplaySuppression: within an attempt, replayed headers and payloads are ignored; across
// attempts, children already written are not duplicated (checked in the database).
func TestReplaySuppression(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{idle: time.Second})
	job := b.job(t, "input")
	th := b.poll(t)
	for _, f := range [][2]string{
		{"0.json", childJSON("a")}, {"0.blob", "A"},
		{"0.json", childJSON("a-replayed")}, // ignored: N not above the current child
		{"1.json", childJSON("b")}, {"1.blob", "B"},
		{"0.blob", "A-replayed"}, // ignored: an earlier child
		{"1.json", childJSON("b-replayed")},
		{"5.json", childJSON("c")}, {"7.blob", "C"}, // gaps are not detected; a later N applies to the current child
	} {
		if err := th.Post(t.Context(), f[0], str(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	// The worker vanishes; the task is handed out again with a new id, and the worker replays all.
	th2 := b.poll(t)
	if th2.ID == th.ID {
		t.Fatal("re-handed task kept its id")
	}
	if got := status(t, http.MethodHead, th.URL); got != 404 {
		t.Errorf("old id answers %d", got)
	}
	if err := th.Post(t.Context(), "heartbeat", nil); !errors.Is(err, workerproto.ErrGone) {
		t.Errorf("old id POST: %v", err)
	}
	s := th2.Stream(t.Context())
	for _, f := range [][2]string{{"0.json", childJSON("a")}, {"0.blob", "A"}, {"1.json", childJSON("b")}, {"1.blob", "B"},
		{"2.json", childJSON("c")}, {"2.blob", "C"}, {"done", ""}} {
		if err := s.Part(f[0], str(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if j := enginetest.WaitJob(t, b.e, job.ID, 10*time.Second); j.State != record.JobComplete {
		t.Fatalf("job %s", j.State)
	}
	root := b.root(t, job)
	kids := b.children(t, root)
	var names []string
	for _, k := range kids {
		names = append(names, k.Name+"="+b.blobText(t, k.BlobSHA256))
	}
	if strings.Join(names, ",") != "a=A,b=B,c=C" || root.NChildren != 3 || root.Error != "" {
		t.Errorf("children %v, n_children %d, error %q", names, root.NChildren, root.Error)
	}
}

func TestAttemptBound(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{idle: 200 * time.Millisecond, attempts: 2})
	job := b.job(t, "input")
	var ids []string
	for range 2 {
		th := b.poll(t) // and never answer
		ids = append(ids, th.ID)
	}
	if ids[0] == ids[1] {
		t.Error("same id twice")
	}
	j := enginetest.WaitJob(t, b.e, job.ID, 10*time.Second)
	root := b.root(t, job)
	if want := "Pdf worker failed 2 times: no request for 200ms"; !strings.HasPrefix(root.Error, want) {
		t.Errorf("item error %q, want %q", root.Error, want)
	}
	if j.State != record.JobComplete {
		t.Errorf("job %s", j.State)
	}
	tasks, _ := b.db.TaskListByJob(t.Context(), store.TaskListParams{JobID: job.ID, State: record.TaskFailed})
	if len(tasks) != 1 || tasks[0].Attempt != 2 {
		t.Errorf("failed tasks %+v", tasks)
	}
}

func TestConcurrentPOSTConflict(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	b.job(t, "input")
	th := b.poll(t)
	s := th.Stream(t.Context())
	if err := s.Part("0.json", str(childJSON("a"))); err != nil {
		t.Fatal(err)
	}
	// The stream's request is open once the server reads its first part; wait for that.
	waitFor(t, 30*time.Second, "stream open", func() bool { // a bound for a loaded CI machine; it returns as soon as it holds
		return rawPost(t, th.URL+"/heartbeat", "", nil) == http.StatusConflict
	})
	if got := status(t, http.MethodHead, th.URL); got != 200 {
		t.Errorf("HEAD beside a POST = %d", got)
	}
	s.Part("0.blob", str("x"))
	s.Part("done", nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestNondeterministicReplayFails: a step run twice must make the same children (DESIGN §4.2).
// After its worker vanished mid-task, the re-handed task replays its children, child 0 with
// other content: the item fails with the error an action in process gets ("nondeterministic
// action: child 0 …"), the child already written stays as it was, and none is added.
func TestNondeterministicReplayFails(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{idle: time.Second})
	job := b.job(t, "input")
	th := b.poll(t)
	for _, f := range [][2]string{{"0.json", childJSON("a")}, {"0.blob", "A at 10:00"}, {"1.json", childJSON("b")}, {"1.blob", "B at 10:00"}} {
		if err := th.Post(t.Context(), f[0], str(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	th2 := b.poll(t) // the first worker vanished
	s := th2.Stream(t.Context())
	for _, f := range [][2]string{{"0.json", childJSON("a")}, {"0.blob", "A at 10:05"}, {"1.json", childJSON("b")}, {"1.blob", "B at 10:05"},
		{"2.json", childJSON("c")}, {"2.blob", "C at 10:05"}, {"done", ""}} {
		if err := s.Part(f[0], str(f[1])); err != nil {
			break // the server may answer (the task failed) before the stream ends
		}
	}
	_ = s.Close()
	if j := enginetest.WaitJob(t, b.e, job.ID, 10*time.Second); j.State != record.JobComplete {
		t.Fatalf("job %s", j.State)
	}
	root := b.root(t, job)
	var names []string
	for _, k := range b.children(t, root) {
		names = append(names, k.Name+"="+b.blobText(t, k.BlobSHA256))
	}
	if strings.Join(names, ",") != "a=A at 10:00" {
		t.Errorf("children %v, want the one written before only", names)
	}
	if !strings.HasPrefix(root.Error, "nondeterministic action: child 0 of ") {
		t.Errorf("item error %q, want the in-process one (nondeterministic action: child 0 …)", root.Error)
	}
}

// TestChildrenInGroups: a task's children are recorded in groups (a multi-row insert per flush
// and one with the result). An attempt that made more than a group's worth of children before its
// worker vanished is replayed whole by the next: the children recorded are kept, the rest added,
// each once, in order, with progress ranges that do not overlap.
func TestChildrenInGroups(t *testing.T) {
	t.Parallel()
	const n = 300 // more than a flush's 256
	b := setup(t, opts{idle: time.Second})
	job := b.job(t, "input")
	th := b.poll(t)
	for i := range 270 {
		for _, f := range [][2]string{{fmt.Sprintf("%d.json", i), childJSON(fmt.Sprintf("c%03d", i))}, {fmt.Sprintf("%d.blob", i), fmt.Sprint(i)}} {
			if err := th.Post(t.Context(), f[0], str(f[1])); err != nil {
				t.Fatal(err)
			}
		}
	}
	root := b.root(t, job)
	waitFor(t, 10*time.Second, "the first group recorded", func() bool { return len(b.children(t, root)) >= 256 })
	th2 := b.poll(t) // the worker vanished: the task comes back
	s := th2.Stream(t.Context())
	for i := range n {
		if err := s.Part(fmt.Sprintf("%d.json", i), str(childJSON(fmt.Sprintf("c%03d", i)))); err != nil {
			t.Fatal(err)
		}
		if err := s.Part(fmt.Sprintf("%d.blob", i), str(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Part("done", str("")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if j := enginetest.WaitJob(t, b.e, job.ID, 30*time.Second); j.State != record.JobComplete {
		t.Fatalf("job %s: %s", j.State, j.Error)
	}
	root = b.root(t, job)
	kids := b.children(t, root)
	if len(kids) != n || root.NChildren != n || root.Error != "" {
		t.Fatalf("%d children, n_children %d, error %q; want %d", len(kids), root.NChildren, root.Error, n)
	}
	for i, k := range kids {
		if k.Ordinal != i || k.Name != fmt.Sprintf("c%03d", i) || b.blobText(t, k.BlobSHA256) != fmt.Sprint(i) {
			t.Fatalf("child %d: ordinal %d, %q = %q", i, k.Ordinal, k.Name, b.blobText(t, k.BlobSHA256))
		}
		if i > 0 && k.RangeLo < kids[i-1].RangeLo+kids[i-1].RangeLen-1e-9 {
			t.Errorf("child %d's progress range starts at %g, inside child %d's [%g, +%g]", i, k.RangeLo, i-1, kids[i-1].RangeLo, kids[i-1].RangeLen)
		}
	}
}

// TestRemoteAttemptsNameTheWorker: the attempts a remote worker ran, the failed one and the one
// a retry ran to completion, name it (its lease owner, "remote:<token id>@<server>") in the item's history,
// as the local worker's attempt of the route step names the local worker.
func TestRemoteAttemptsNameTheWorker(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	job := b.job(t, "hello pdf")
	if err := b.poll(t).Post(t.Context(), "error", str("bad page")); err != nil {
		t.Fatal(err)
	}
	// A worker's error fails the item for good: a retry runs it again.
	if j := enginetest.WaitJob(t, b.e, job.ID, 30*time.Second); j.State != record.JobComplete {
		t.Fatalf("job %s", j.State)
	}
	if _, err := b.e.Retry(t.Context(), job.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.poll(t).Post(t.Context(), "done", nil); err != nil {
		t.Fatal(err)
	}
	if j := enginetest.WaitJob(t, b.e, job.ID, 30*time.Second); j.State != record.JobComplete {
		t.Fatalf("job %s", j.State)
	}
	atts, err := b.e.ItemHistory(t.Context(), b.root(t, job).ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range atts {
		worker := a.Worker
		if strings.HasPrefix(worker, "remote:") {
			worker = "remote"
		} else if worker == b.w.Owner() {
			worker = "local"
		}
		got = append(got, fmt.Sprintf("%s %d %s %s", a.Step, a.Attempt, a.State, worker))
	}
	want := []string{"route 1 complete local", "convert 1 failed remote", "convert 2 complete remote"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("history %q, want %q", got, want)
	}
}

// TestChildTextSanitised checks that what a remote worker sends is sanitised where every child
// is (engine.NewChild): control characters and invalid UTF-8 in its name and metadata, its
// text also capped at the server's MaxText characters.
func TestChildTextSanitised(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{maxText: 5})
	job := b.job(t, "input")
	th := b.poll(t)
	hdr := `{"filename":"in0.pdf/a\u0000b","contentType":"application/pdf","languageCode":"en","metadata":{"k":"v\u0007"},"wantOcr":false,"wantSplitByPage":false}`
	for _, f := range [][2]string{{"0.json", hdr}, {"0.blob", "x"}, {"0.txt", "a\x00b\r\ncdef"}, {"done", ""}} {
		if err := th.Post(t.Context(), f[0], str(f[1])); err != nil {
			t.Fatalf("%s: %v", f[0], err)
		}
	}
	enginetest.WaitJob(t, b.e, job.ID, 10*time.Second)
	kids := b.children(t, b.root(t, job))
	if len(kids) != 1 {
		t.Fatalf("children %+v, want one", kids)
	}
	if k := kids[0]; k.Name != "in0.pdf/a b" || k.Text != "a b\nc" || !strings.Contains(string(k.Metadata), `"k":"v "`) {
		t.Errorf("child name %q, text %q, metadata %s; want %q, %q and k %q", k.Name, k.Text, k.Metadata, "in0.pdf/a b", "a b\nc", "v ")
	}
}
