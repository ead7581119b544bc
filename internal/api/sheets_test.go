package api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/api"
	"github.com/sluice-project/sluice/internal/egress"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// TestSheetsAPI uploads a sheet of supplemental files (no converter runs) through /v1/sheets,
// sees it validated, approves it, follows its progress on the server-sent events to its end,
// and reads a file set's action states from /v1/objects; a sheet with a bad row is row_fail
// with its {field, message}, and approving it is a 409. Every answer must match the OpenAPI
// document.
func TestSheetsAPI(t *testing.T) {
	t.Parallel()
	b := setupFull(t, drivertest.OpenSQLite, nil, &objects.Service{})
	b.matchDoc = true
	files := filepath.Join(b.dir, "inbox", "batch")
	if err := os.MkdirAll(files, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"notes-1.txt", "notes-2.txt"} {
		if err := os.WriteFile(filepath.Join(files, f), []byte("notes of "+f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	head := strings.Join(objects.Headers, ",") + "\n"
	post := func(sheet string, want int) map[string]any {
		t.Helper()
		code, data := b.do(t, "POST", "/v1/sheets?name=batch.csv&files_dir="+url.QueryEscape(files), b.admin, "text/csv", strings.NewReader(sheet))
		if code != want {
			t.Fatalf("POST /v1/sheets = %d, want %d: %s", code, want, data)
		}
		var out map[string]any
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		return out
	}
	wait := func(id int64, statuses ...string) map[string]any {
		var s map[string]any
		poll.Until(t, 20*time.Second, fmt.Sprintf("sheet %d to be %v", id, statuses), func() (bool, string) {
			b.json(t, "GET", fmt.Sprintf("/v1/sheets/%d", id), nil, 200, &s)
			for _, st := range statuses {
				if s["status"] == st {
					return true, ""
				}
			}
			return false, fmt.Sprint(s["status"])
		})
		return s
	}

	if code, _ := b.do(t, "POST", "/v1/sheets?files_dir=/etc", b.admin, "text/csv", strings.NewReader(head)); code != http.StatusBadRequest {
		t.Errorf("files_dir outside the path roots = %d, want 400", code)
	}
	bad := int64(post(head+"IMAGE,w9,f9,missing.txt,a description,S,a label,,\n", 201)["id"].(float64))
	wait(bad, objects.StatusRowFail)
	var rows struct{ Rows []objects.Row }
	b.json(t, "GET", fmt.Sprintf("/v1/sheets/%d/rows?failed=true", bad), nil, 200, &rows)
	if len(rows.Rows) != 1 || rows.Rows[0].Row != 1 || rows.Rows[0].Errors[0] != (objects.FieldError{Field: "filename", Message: "filename: File not Found: missing.txt"}) {
		t.Errorf("failed rows %+v", rows.Rows)
	}
	// Empty results are [] (the document's arrays are not nullable; matchDoc checks them too).
	code, data := b.do(t, "GET", fmt.Sprintf("/v1/sheets/%d", bad), b.reader, "", nil)
	wantEmpty(t, code, data, "works")
	b.json(t, "POST", fmt.Sprintf("/v1/sheets/%d/approve", bad), nil, http.StatusConflict, nil)
	var deleted objects.Sheet
	b.json(t, "DELETE", fmt.Sprintf("/v1/sheets/%d", bad), nil, 200, &deleted)
	if deleted.Status != objects.StatusDeleted {
		t.Errorf("deleted sheet is %s", deleted.Status)
	}

	id := int64(post(head+"IMAGE,w1,f1,notes-1.txt,a description,S,a label,,\nIMAGE,w1,f2,notes-2.txt,a description,S,a label,,\n", 201)["id"].(float64))
	wait(id, objects.StatusAwaitingApproval)
	code, data = b.do(t, "GET", fmt.Sprintf("/v1/sheets/%d/rows?failed=true", id), b.reader, "", nil)
	wantEmpty(t, code, data, "rows")
	code, data = b.do(t, "GET", fmt.Sprintf("/v1/sheets/%d", id), b.reader, "", nil)
	wantEmpty(t, code, data, "errors")
	code, data = b.do(t, "POST", "/v1/sheets/validate?files_dir="+url.QueryEscape(files), b.reader, "text/csv",
		strings.NewReader(head+"IMAGE,w1,f1,notes-1.txt,a description,S,a label,,\n"))
	wantEmpty(t, code, data, "errors", "failed_rows")
	b.json(t, "POST", fmt.Sprintf("/v1/sheets/%d/approve", id), nil, http.StatusAccepted, nil)

	req, _ := http.NewRequestWithContext(t.Context(), "GET", fmt.Sprintf("%s/v1/sheets/%d/progress", b.srv.URL, id), nil)
	req.Header.Set("Authorization", "Bearer "+b.reader)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var last, end string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && end == "" {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			if strings.Contains(d, `"percent_complete"`) {
				last = d
			} else {
				end = d
			}
		}
	}
	if end != `{"status":"completed"}` || !strings.Contains(last, `"completed_file_sets":2`) || !strings.Contains(last, `"percent_complete":100`) {
		t.Errorf("progress stream ended %q after %q", end, last)
	}
	var obj struct {
		FileSet objects.FileSet `json:"file_set"`
	}
	b.json(t, "GET", "/v1/objects/f2", nil, 200, &obj)
	var got []string
	for _, a := range obj.FileSet.ActionStates {
		got = append(got, a.Action+"="+a.Outcome)
	}
	want := "IngestFileSet=ok ExtractMimeType=ok InitializeDispatch=ok GenerateFileSetDigests=ok CopyFileToPreservation=ok FileSetComplete=ok"
	if strings.Join(got, " ") != want {
		t.Errorf("f2's action states %v, want %s", got, want)
	}
	var work struct {
		Work objects.Work `json:"work"`
	}
	b.json(t, "GET", "/v1/objects/w1", nil, 200, &work)
	if len(work.Work.FileSets) != 2 {
		t.Errorf("work w1 has %d file sets, want 2", len(work.Work.FileSets))
	}
	b.json(t, "GET", "/v1/objects/nothing", nil, 404, nil)
	var hist objects.ObjectHistory
	b.json(t, "GET", "/v1/objects/w1/history", nil, 200, &hist)
	if hist.Work != "w1" || len(hist.FileSets) != 2 || hist.FileSets[1].Accession != "f2" || hist.FileSets[1].Row != 2 {
		t.Fatalf("history of w1: %+v", hist)
	}
	var steps []string
	for _, e := range hist.FileSets[1].History {
		if e.Action == "CopyFileToPreservation" {
			steps = append(steps, e.Outcome)
		}
	}
	if strings.Join(steps, " ") != "waiting started ok" {
		t.Errorf("f2's CopyFileToPreservation history %v, want waiting started ok", steps)
	}
	b.json(t, "GET", "/v1/objects/nothing/history", nil, 404, nil)
	b.json(t, "DELETE", fmt.Sprintf("/v1/sheets/%d", id), nil, http.StatusConflict, nil)
}

// TestSNSSubscriptionConfirmation posts an SNS SubscriptionConfirmation to
// /v1/sheets/transcoded: its SubscribeURL is fetched through the egress policy — a loopback
// server the policy allows is called once; under the default policy, which refuses loopback,
// the answer is 400 and nothing is called. A Notification of a PROGRESSING job is acknowledged
// and fires nothing; a body that is no transcoder's event is a 400 saying so.
func TestSNSSubscriptionConfirmation(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	sns := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("Action") == "ConfirmSubscription" && r.URL.Query().Get("Token") == "tok-1" {
			calls.Add(1)
		}
		fmt.Fprint(w, "<ConfirmSubscriptionResponse/>")
	}))
	defer sns.Close()
	confirm, _ := json.Marshal(map[string]any{"Type": "SubscriptionConfirmation", "MessageId": "m-0", "Token": "tok-1",
		"TopicArn": "arn:aws:sns:us-east-1:000000000000:mediaconvert", "Message": "You have chosen to subscribe to the topic …",
		"SubscribeURL": sns.URL + "/?Action=ConfirmSubscription&TopicArn=arn:aws:sns:us-east-1:000000000000:mediaconvert&Token=tok-1",
		"Timestamp":    "2026-11-29T00:00:00.000Z", "SignatureVersion": "1", "Signature": "c2ln", "SigningCertURL": "https://sns.us-east-1.amazonaws.com/cert.pem"})
	allow, err := egress.New([]string{"127.0.0.1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		policy *egress.Policy
		code   int
		calls  int32
	}{{"default policy", nil, http.StatusBadRequest, 0}, {"loopback allowed", allow, http.StatusOK, 1}} {
		b := setupFull(t, drivertest.OpenSQLite, func(c *api.Config) { c.Egress = tc.policy }, &objects.Service{})
		b.matchDoc = true
		calls.Store(0)
		code, data := b.do(t, "POST", "/v1/sheets/transcoded", b.admin, "text/plain; charset=UTF-8", strings.NewReader(string(confirm)))
		if code != tc.code || calls.Load() != tc.calls {
			t.Errorf("%s: %d %s, %d calls; want %d, %d calls", tc.name, code, data, calls.Load(), tc.code, tc.calls)
		}
		if tc.policy == nil {
			if !strings.Contains(string(data), "refused") {
				t.Errorf("%s: %s does not say the policy refused the address", tc.name, data)
			}
			code, _ = b.do(t, "POST", "/v1/sheets/transcoded", "", "text/plain", strings.NewReader(string(confirm)))
			if code != http.StatusUnauthorized || calls.Load() != 0 {
				t.Errorf("without a token: %d, %d calls", code, calls.Load())
			}
			progressing, _ := json.Marshal(map[string]any{"Type": "Notification", "MessageId": "m-1", "TopicArn": "arn:aws:sns:us-east-1:000000000000:mediaconvert",
				"Message": `{"detail-type": "MediaConvert Job State Change", "detail": {"status": "PROGRESSING", "userMetadata": {"file_set_id": "x"}}}`})
			var f objects.Transcoded
			b.json(t, "POST", "/v1/sheets/transcoded", json.RawMessage(progressing), http.StatusAccepted, &f)
			if f.Fired != 0 || f.SNS != "Notification" || f.Status != "PROGRESSING" || f.Note == "" {
				t.Errorf("PROGRESSING: %+v", f)
			}
			code, data = b.do(t, "POST", "/v1/sheets/transcoded", b.admin, "application/json", strings.NewReader(`{"hello": "world"}`))
			if code != http.StatusBadRequest || !strings.Contains(string(data), "neither a MediaConvert Job State Change") {
				t.Errorf("not an event: %d %s", code, data)
			}
		}
	}
}

// wantEmpty fails t unless an answer is a 200 whose JSON object has each key as an empty array:
// [], not null nor missing.
func wantEmpty(t *testing.T, code int, data []byte, keys ...string) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); code != 200 || err != nil {
		t.Fatalf("%d %v: %s", code, err, data)
	}
	for _, k := range keys {
		if a, ok := m[k].([]any); !ok || len(a) != 0 {
			t.Errorf("%s is %#v, want []: %s", k, m[k], data)
		}
	}
}

// TestSheetLimits: a sheet is read to objects.MaxSheetBytes and no further, whatever
// --max-upload-bytes allows (10 GiB by default): one byte more is a 413 that says so, on
// /v1/sheets/validate (open to readers) and on /v1/sheets, with no sheet stored; under a lower
// --max-upload-bytes, that flag's limit applies and is named.
func TestSheetLimits(t *testing.T) {
	t.Parallel()
	b := setupFull(t, drivertest.OpenSQLite, nil, &objects.Service{})
	small := setupFull(t, drivertest.OpenSQLite, func(c *api.Config) { c.Limits.MaxUploadBytes = 100 }, &objects.Service{})
	for _, c := range []struct {
		name, path string
		b          *bundle
		token      string
		size       int64
		msg        string
	}{
		{"validate over the sheet limit", "/v1/sheets/validate", b, b.reader, objects.MaxSheetBytes + 1, "the sheet is larger than 64 MiB, the most a sheet may be"},
		{"upload over the sheet limit", "/v1/sheets", b, b.admin, objects.MaxSheetBytes + 1, "the sheet is larger than 64 MiB, the most a sheet may be"},
		{"validate over --max-upload-bytes", "/v1/sheets/validate", small, small.reader, 101, "the sheet is larger than 100 bytes (--max-upload-bytes)"},
	} {
		files := filepath.Join(c.b.dir, "inbox")
		if err := os.MkdirAll(files, 0o755); err != nil {
			t.Fatal(err)
		}
		code, data := c.b.do(t, "POST", c.path+"?files_dir="+url.QueryEscape(files), c.token, "text/csv", io.LimitReader(letters{}, c.size))
		if e := apiError(t, data); code != http.StatusRequestEntityTooLarge || e.Code != "too_large" || e.Message != c.msg {
			t.Errorf("%s: %d %+v; want 413 too_large: %s", c.name, code, e, c.msg)
		}
	}
	b.noJobs(t)
	small.noJobs(t)
}

// letters is an endless body of the letter a.
type letters struct{}

func (letters) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}
