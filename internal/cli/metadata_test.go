package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/poll"
)

// exactMetadata is metadata that a float64 or a guess at types would change: a 20-digit
// integer, a string of digits with a leading zero, a fraction, a nested object and non-ASCII
// keys. exactFragments are how each value reads in compact JSON.
const exactMetadata = `{"big":12345678901234567890,"zip":"01234","half":1.5,"nested":{"ключ":[1,2.50],"deep":{"n":-0.000001}},"名前":"值"}`

var exactFragments = []string{`"big":12345678901234567890`, `"zip":"01234"`, `"half":1.5`,
	`"nested":{"deep":{"n":-0.000001},"ключ":[1,2.50]}`, `"名前":"值"`}

// checkExact fails unless md, decoded as metadata, holds exactMetadata's values unchanged.
func checkExact(t *testing.T, where string, md map[string]any) {
	t.Helper()
	nested, _ := md["nested"].(map[string]any)
	deep, _ := nested["deep"].(map[string]any)
	if md["big"] != json.Number("12345678901234567890") || md["zip"] != "01234" || md["half"] != json.Number("1.5") ||
		fmt.Sprint(nested["ключ"]) != "[1 2.50]" || deep["n"] != json.Number("-0.000001") || md["名前"] != "值" {
		t.Errorf("%s: metadata %#v, want it as given: %s", where, md, exactMetadata)
	}
}

// compact returns raw (a JSON object) re-encoded compactly with sorted keys, numbers as written.
func compact(t *testing.T, raw []byte) string {
	t.Helper()
	md, err := metadata.Decode(raw)
	if err != nil {
		t.Fatalf("metadata %s: %v", raw, err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(md); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(buf.String())
}

// TestMetadataRoundTrip: metadata given to `sluice ingest --metadata` or `sluice run --meta`
// comes back exactly as given — a 20-digit integer, "01234", 1.5, nested objects, non-ASCII
// keys — from job show, documents show, documents export (index.jsonl and jsonl), documents
// search and a search filter on them, on both drivers.
func TestMetadataRoundTrip(t *testing.T) {
	clearEnv(t)
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			global := driverFlags(t, driver)
			in := filepath.Join(t.TempDir(), "letter.txt")
			if err := os.WriteFile(in, []byte("a letter about turnips\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			sluice := func(args ...string) string {
				t.Helper()
				code, out, errs := run(t, append(args, global...)...)
				if code != 0 {
					t.Fatalf("%q: exit %d: %s %s", args, code, out, errs)
				}
				return out
			}
			sluice("ingest", "--metadata", exactMetadata, in)
			// run --meta gives a job its metadata the same way; job show prints it.
			sluice("run", "--meta", exactMetadata, "documents", in)
			for _, id := range []string{"1", "2"} {
				var shown struct {
					Job struct {
						Metadata map[string]any `json:"metadata"`
					} `json:"job"`
				}
				text := sluice("job", "show", id, "--output", "json")
				if err := metadata.Unmarshal([]byte(text), &shown); err != nil {
					t.Fatalf("job show %s: %v:\n%s", id, err, text)
				}
				checkExact(t, "job show "+id, shown.Job.Metadata)
			}

			// The index, written to stdout and to index.jsonl, holds each value as given.
			out := filepath.Join(t.TempDir(), "export")
			sluice("documents", "export", "--format", "dir", "--out", out, "--job", "1")
			index, err := os.ReadFile(filepath.Join(out, "index.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			for name, text := range map[string]string{"index.jsonl": string(index), "export --format jsonl": sluice("documents", "export", "--format", "jsonl", "--job", "1")} {
				lines := strings.Split(strings.TrimSpace(text), "\n")
				if len(lines) != 1 {
					t.Fatalf("%s: %d lines, want one document:\n%s", name, len(lines), text)
				}
				for _, f := range exactFragments {
					if !strings.Contains(lines[0], f) {
						t.Errorf("%s does not hold %s byte for byte:\n%s", name, f, lines[0])
					}
				}
				var ie struct {
					ID       int64          `json:"id"`
					Metadata map[string]any `json:"metadata"`
				}
				if err := metadata.Unmarshal([]byte(lines[0]), &ie); err != nil {
					t.Fatal(err)
				}
				checkExact(t, name, ie.Metadata)
			}

			// documents show prints the index entry, indented.
			var ie struct {
				ID int64 `json:"id"`
			}
			json.Unmarshal(index, &ie)
			shown := sluice("documents", "show", fmt.Sprint(ie.ID))
			head, _, _ := strings.Cut(shown, "\n\n")
			var doc struct {
				Metadata map[string]any `json:"metadata"`
			}
			if err := metadata.Unmarshal([]byte(head), &doc); err != nil {
				t.Fatalf("documents show: %v:\n%s", err, shown)
			}
			checkExact(t, "documents show", doc.Metadata)
			if !strings.Contains(shown, `"big": 12345678901234567890`) || !strings.Contains(shown, `"half": 1.5`) {
				t.Errorf("documents show does not print the numbers as given:\n%s", shown)
			}

			// Search shows the document's metadata as given and filters by a value as written.
			for _, filter := range [][]string{nil, {"--meta", "big=12345678901234567890"}, {"--meta", "zip=01234"}, {"--meta", "half=1.5"}} {
				args := append([]string{"documents", "search", "turnips", "--job", "1", "--output", "json"}, filter...)
				var res struct {
					Hits []struct {
						Metadata json.RawMessage `json:"metadata"`
					} `json:"hits"`
				}
				text := sluice(args...)
				if err := json.Unmarshal([]byte(text), &res); err != nil || len(res.Hits) != 1 {
					t.Fatalf("%q: %v, want one hit:\n%s", args, err, text)
				}
				got := compact(t, res.Hits[0].Metadata)
				for _, f := range exactFragments {
					if !strings.Contains(got, f) {
						t.Errorf("%q: the hit's metadata does not hold %s: %s", args, f, res.Hits[0].Metadata)
					}
				}
			}
		})
	}
}

// TestEventMatchesNothing: `sluice event fire --job 1 --key k=nope go`, when no item has k=nope,
// exits 1 with a message naming the event and the keys of the items that wait for it.
func TestEventMatchesNothing(t *testing.T) {
	clearEnv(t)
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			global := driverFlags(t, driver)
			jobID := waitingJob(t, global, "go", map[string]any{"k": "v-1", "n": json.Number("12345678901234567890")})
			code, out, errs := run(t, append([]string{"event", "fire", "--job", fmt.Sprint(jobID), "--key", "k=nope", "go"}, global...)...)
			if code != ExitFailed {
				t.Errorf("exit %d, want 1; stdout %q", code, out)
			}
			if strings.Contains(out, "fired") {
				t.Errorf("stdout says something fired: %q", out)
			}
			for _, want := range []string{`"go"`, "k=v-1", "n=12345678901234567890"} {
				if !strings.Contains(errs, want) {
					t.Errorf("stderr %q does not name %s", errs, want)
				}
			}
			if w := implementationWords.FindString(out + errs); w != "" {
				t.Errorf("output holds %q: %s%s", w, out, errs)
			}
			// The waiting item's own key fires it.
			code, out, errs = run(t, append([]string{"event", "fire", "--job", fmt.Sprint(jobID), "--key", "k=v-1", "go"}, global...)...)
			if code != 0 || !strings.Contains(out, "fired go on 1 of 1 items") {
				t.Errorf("fire by k=v-1: exit %d, %q %q", code, out, errs)
			}
		})
	}
}

// waitingJob creates a job in the installation of global (see [driverFlags]) whose one item,
// with md as its metadata, waits for the external event, and returns its id once it waits.
func waitingJob(t *testing.T, global []string, event string, md map[string]any) int64 {
	t.Helper()
	e := &env{stdout: io.Discard, stderr: io.Discard}
	fs, c := newFlags(e, "test", "test")
	if _, err := parse(fs, global); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	n, err := c.open(ctx, e, true)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	src := fmt.Sprintf("name: waits\nexternal: [%s]\nsteps:\n  publish: {action: noop, needs: [start, %s]}\n", event, event)
	if _, _, err := n.Engine.ApplyWorkflow(ctx, []byte(src), "waits.yaml"); err != nil {
		t.Fatal(err)
	}
	job, _, err := n.Engine.CreateJob(ctx, engine.CreateJobParams{Workflow: "waits", Open: true})
	if err != nil {
		t.Fatal(err)
	}
	sha, size, err := n.Blobs.Put(ctx, strings.NewReader("please approve"))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Engine.AddRoots(ctx, job, []engine.Root{{Name: "request.txt", BlobSHA256: sha, Size: size, ContentType: "text/plain", Metadata: md}}); err != nil {
		t.Fatal(err)
	}
	n.Start(ctx)
	defer n.Stop(10 * time.Second)
	poll.Until(t, 30*time.Second, "the item to wait for "+event, func() (bool, string) {
		w, err := n.Engine.WaitingFor(ctx, job.ID, event, 10)
		if err != nil {
			return false, err.Error()
		}
		return len(w) == 1, fmt.Sprint(w)
	})
	return job.ID
}

// TestItemStatusNumbers: job show prints an item's status numbers as written, not as float64
// ("1.2345678901234567e+19").
func TestItemStatusNumbers(t *testing.T) {
	t.Parallel()
	if got, want := itemStatus([]byte(`{"status":{"n":12345678901234567890,"f":2.50,"ok":true}}`)), "f=2.50 n=12345678901234567890 ok=true"; got != want {
		t.Errorf("itemStatus = %q, want %q", got, want)
	}
}
