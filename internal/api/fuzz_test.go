package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// FuzzBodies sends arbitrary bytes as each request body the API decodes: a job as JSON and as a
// multipart upload (boundary "B"), an external event, and a workflow to validate. Whatever the
// bytes, the answer is a success or a client error with a JSON body, never a 5xx (a panic in a
// handler is one).
func FuzzBodies(f *testing.F) {
	for _, s := range []string{
		`{"workflow":"docs","metadata":{"batch":"b1"},"options":{"ocr":true}}`,
		`{"workflow":"docs","paths":["../../etc/passwd","inbox/a.txt"],"key":"k1"}`,
		`{"event":"approved","item_id":1}`, `{"event":"approved","key":"k","value":[1,{"a":null}]}`,
		`{"event":"approved","body":{"id":"x"}}`,
		"--B\r\nContent-Disposition: form-data; name=\"job\"\r\n\r\n{\"workflow\":\"docs\"}\r\n--B\r\n" +
			"Content-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\r\nhello\r\n--B--\r\n",
		"--B\r\nContent-Disposition: form-data; name=\"files\"\r\n\r\nx\r\n--B--\r\n",
		"name: w\nsteps:\n  a: {action: doc, needs: [start]}\n",
		`{"workflow":1}`, `[]`, `null`, "",
	} {
		f.Add([]byte(s))
	}
	b := setupWith(f, drivertest.OpenSQLite, nil)
	post := func(t testing.TB, path, contentType string, body []byte) (int, []byte) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.srv.URL+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+b.admin)
		req.Header.Set("Content-Type", contentType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer resp.Body.Close()
		var out bytes.Buffer
		_, _ = out.ReadFrom(resp.Body)
		return resp.StatusCode, out.Bytes()
	}
	code, data := post(f, "/v1/workflows", "application/yaml", []byte(docsWorkflow))
	if code != http.StatusCreated {
		f.Fatalf("apply the workflow: %d %s", code, data)
	}
	code, data = post(f, "/v1/jobs", "application/json", []byte(`{"workflow":"docs"}`))
	var job struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal(data, &job); code != http.StatusCreated || err != nil {
		f.Fatalf("create a job: %d %s", code, data)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, r := range []struct{ path, contentType string }{
			{"/v1/jobs", "application/json"},
			{"/v1/jobs", "multipart/form-data; boundary=B"},
			{fmt.Sprintf("/v1/jobs/%d/events", job.ID), "application/json"},
			{"/v1/workflows/validate", "application/yaml"},
		} {
			code, data := post(t, r.path, r.contentType, body)
			if code >= 500 || !json.Valid(data) {
				t.Fatalf("POST %s (%s) answered %d: %s", r.path, r.contentType, code, data)
			}
		}
	})
}
