package workerproto_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/record"
)

// multipartBody joins parts (name, payload) into a multipart/form-data body with boundary "B".
func multipartBody(parts ...[2]string) string {
	var sb strings.Builder
	for _, p := range parts {
		sb.WriteString("--B\r\nContent-Disposition: form-data; name=\"" + p[0] + "\"\r\n\r\n" + p[1] + "\r\n")
	}
	sb.WriteString("--B--\r\n")
	return sb.String()
}

// FuzzMultipart streams arbitrary bodies as a worker's multipart POST of one task. Whatever the
// bytes, the server answers with one of the protocol's statuses (never a 5xx, never a dropped
// connection, which is what a panic in a handler looks like to the client), and the task can
// still be canceled.
func FuzzMultipart(f *testing.F) {
	for _, body := range []string{
		multipartBody([2]string{"0.json", childJSON("a")}, [2]string{"0.blob", "A"}, [2]string{"0.txt", "text"},
			[2]string{"progress", "0.5"}, [2]string{"1.json", childJSON("b")}, [2]string{"inherit-blob", ""}, [2]string{"done", ""}),
		multipartBody([2]string{"0.json", childJSON("a")}, [2]string{"0-thumbnail.png", "\x89PNG"}, [2]string{"error", "bad input"}),
		multipartBody([2]string{"progress", `{"children":{"nProcessed":1,"nTotal":3}}`}, [2]string{"heartbeat", ""}, [2]string{"0.blob", "x"}),
		multipartBody([2]string{"0.json", `{"filename":1}`}),
		multipartBody([2]string{"99999999.json", childJSON("z")}, [2]string{"2.json", childJSON("y")}, [2]string{"done", ""}),
		"--B\r\nContent-Disposition: form-data; name=\"0.json\"\r\n\r\n{\"filen", // cut off
		"garbage",
		"",
	} {
		f.Add([]byte(body))
	}
	b := setup(f, opts{})
	f.Fuzz(func(t *testing.T, body []byte) {
		job := b.job(t, "input")
		th := b.poll(t)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, th.URL, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "multipart/form-data; boundary=B")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST: %v", err)
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusAccepted, http.StatusBadRequest, http.StatusNotFound:
		default:
			t.Fatalf("POST answered %s", resp.Status)
		}
		// A task the body did not end is canceled, so the next input gets a task of its own.
		if j, err := b.db.JobGet(t.Context(), job.ID); err != nil {
			t.Fatal(err)
		} else if j.State == record.JobRunning {
			// The body may have ended the task meanwhile, completing the job: then there is
			// nothing to cancel, and the job must have ended.
			if err := b.e.Cancel(t.Context(), job.ID); err != nil {
				if j, gerr := b.db.JobGet(t.Context(), job.ID); gerr != nil || j.State == record.JobRunning {
					t.Fatalf("cancel after the POST: %v", err)
				}
			}
		}
	})
}
