package cli

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/audit"
	"github.com/sluice-project/sluice/internal/node"
)

// TestIngestProgressLine: the ingest line counts the inputs given and the documents made. It said
// "files" and counted every item, archive entries and derived files included (57 inputs showed
// as 40,261 files).
func TestIngestProgressLine(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := 0; i < 30; i++ {
		w, _ := zw.Create(fmt.Sprintf("entry-%02d.txt", i))
		fmt.Fprintf(w, "entry %d\n", i)
	}
	zw.Close()
	os.WriteFile(filepath.Join(dir, "a.zip"), buf.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, "b.txt"), []byte("hello world\n"), 0o644)
	code, out, errs := run(t, "--data", filepath.Join(dir, "data"), "ingest", filepath.Join(dir, "a.zip"), filepath.Join(dir, "b.txt"))
	if code != 0 {
		t.Fatalf("ingest: exit %d, %s %s", code, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, "2/2 inputs done, 31 documents") {
		t.Errorf("the last progress line is %q, want it to say 2/2 inputs done, 31 documents", last)
	}
}

// TestIngestDataDirURIBytes: a data dir whose path holds bytes a URI reads ('#', '?', '%') is
// used as given. The database's name was pasted into a "file:" URI unescaped, so
// `--data /tmp/a#b` made the database /tmp/a and the blobs' small.db /tmp/a#b/blobs/…: a second
// data dir would share the first's database.
func TestIngestDataDirURIBytes(t *testing.T) {
	clearEnv(t)
	for _, name := range []string{"a#b", "a?b", "a%23b"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "in.txt")
			if err := os.WriteFile(in, []byte("hello world\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			data := filepath.Join(dir, name)
			if code, out, errs := run(t, "ingest", "--data", data, in); code != 0 {
				t.Fatalf("ingest --data %s: exit %d, %s %s", data, code, out, errs)
			}
			if _, err := os.Stat(filepath.Join(data, "sluice.db")); err != nil {
				t.Errorf("no database in the data dir: %v", err)
			}
			entries, _ := os.ReadDir(dir)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if len(names) != 2 {
				t.Errorf("%s holds %q, want only in.txt and %s", dir, names, name)
			}
			code, out, errs := run(t, "documents", "list", "--data", data, "--output", "json")
			if code != 0 || !strings.Contains(out, "in.txt") {
				t.Errorf("documents list: exit %d, %q %q", code, out, errs)
			}
		})
	}
}

// TestIngestSkipsUnreadableInputs: an input that cannot be read — missing, a symlink loop, a file
// without read permission (when the test is not root, who reads it anyway) — is named on stderr
// with its reason while the others are ingested, and the exit status is 1; a symbolic link in a
// folder is named as not followed. The first such input failed the whole command before.
func TestIngestSkipsUnreadableInputs(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(in, "folder"), 0o755))
	must(os.WriteFile(filepath.Join(in, "good.txt"), []byte("good words\n"), 0o644))
	must(os.WriteFile(filepath.Join(in, "new\nline.txt"), []byte("a name with a newline\n"), 0o644))
	must(os.WriteFile(filepath.Join(in, "folder", "inner.txt"), []byte("inner words\n"), 0o644))
	must(os.Symlink("..", filepath.Join(in, "folder", "up")))
	must(os.Symlink("loop", filepath.Join(in, "loop")))
	args := []string{"ingest", "--data", filepath.Join(dir, "data"), filepath.Join(in, "good.txt"), filepath.Join(in, "missing.txt"),
		filepath.Join(in, "loop"), filepath.Join(in, "new\nline.txt"), filepath.Join(in, "folder")}
	wantErr := map[string]string{
		filepath.Join(in, "missing.txt"):  "no such file or directory",
		filepath.Join(in, "loop"):         "too many levels of symbolic links",
		filepath.Join(in, "folder", "up"): "a symbolic link, not followed",
	}
	docs := []string{"good.txt", `new\nline.txt`, "folder/inner.txt"}
	if os.Geteuid() != 0 {
		noperm := filepath.Join(in, "noperm.txt")
		must(os.WriteFile(noperm, []byte("secret\n"), 0o000))
		args = append(args, noperm)
		wantErr[noperm] = "permission denied"
	}
	code, out, errs := run(t, args...)
	if code != ExitFailed {
		t.Errorf("exit %d, want 1 (inputs were skipped): %s %s", code, out, errs)
	}
	for path, reason := range wantErr {
		if want := fmt.Sprintf("skipped %q: %s", path, reason); !strings.Contains(errs, want) {
			t.Errorf("stderr does not say %s:\n%s", want, errs)
		}
	}
	if !strings.Contains(errs, fmt.Sprintf("%d inputs could not be read", len(wantErr)-1)) {
		t.Errorf("stderr does not count the inputs not read:\n%s", errs)
	}
	code, out, errs = run(t, "documents", "list", "--data", filepath.Join(dir, "data"), "--output", "json")
	if code != 0 {
		t.Fatalf("documents list: exit %d, %s", code, errs)
	}
	for _, d := range docs {
		if !strings.Contains(out, d) {
			t.Errorf("no document %s in %s", d, out)
		}
	}
	if strings.Contains(out, `"error"`) && strings.Contains(out, "missing.txt") {
		t.Errorf("a skipped input became an item: %s", out)
	}
	// Nothing readable at all is an error naming it, and no job.
	code, _, errs = run(t, "ingest", "--data", filepath.Join(dir, "data2"), filepath.Join(in, "missing.txt"))
	if code != ExitFailed || !strings.Contains(errs, "missing.txt") || !strings.Contains(errs, "no input could be read") {
		t.Errorf("only a missing input: exit %d, %q", code, errs)
	}
}

// TestTextDocumentFootprint: a small text document costs its data dir tens of kilobytes, not the
// 77 KB each of 100,000 such files once took (7.7 GB for 205 MB of zipped text: an 8-bit
// thumbnail, fonts, a WAL never checkpointed). 300 files of 2 KB: the whole data dir — database,
// blobs (original, PDF, thumbnail, text), WAL — at most 48 KB a document (about 40 today).
func TestTextDocumentFootprint(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	os.Mkdir(in, 0o755)
	words := []string{"alpha", "beta", "gamma", "delta", "river", "stone", "paper", "light", "sound", "water"}
	const files = 300
	for i := range files {
		r := rand.New(rand.NewPCG(uint64(i), 1)) // every file its own text: no blob shared
		var b strings.Builder
		for b.Len() < 2048 {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteByte(' ')
		}
		os.WriteFile(filepath.Join(in, fmt.Sprintf("f%03d.txt", i)), []byte(b.String()[:2048]), 0o644)
	}
	data := filepath.Join(dir, "data")
	if code, out, errs := run(t, "--data", data, "ingest", in); code != 0 {
		t.Fatalf("ingest: exit %d, %s %s", code, out, errs)
	}
	var total int64
	parts := map[string]int64{}
	filepath.WalkDir(data, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(data, p)
		if strings.HasPrefix(rel, filepath.Join("blobs", "sha256")) {
			rel = "blobs/sha256/…"
		}
		parts[rel] += fi.Size()
		total += fi.Size()
		return nil
	})
	t.Logf("data dir %d bytes for %d documents (%d a document): %v", total, files, total/files, parts)
	if per := total / files; per > 48<<10 {
		t.Errorf("a 2 KB text document costs the data dir %d bytes (%v); want at most 48 KiB", per, parts)
	}
}

// TestRetryKeepsErrors is the reported reproduction: `sluice ingest` of a folder with two PDFs
// that cannot be read ends "0 documents, 2 errors"; `sluice job retry 1` and `sluice resume`
// run them again, they fail again, and the job still shows 2 errors — in the summary, in
// `documents show` and in `job show`, whose history lists both attempts of each.
func TestRetryKeepsErrors(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	in, data := filepath.Join(dir, "in"), filepath.Join(dir, "data")
	os.MkdirAll(in, 0o755)
	// Detected as PDFs by their signature; pdfinfo (or its absence) fails on both.
	os.WriteFile(filepath.Join(in, "broken.pdf"), []byte("%PDF-1.4\nnot really a pdf\n"), 0o644)
	os.WriteFile(filepath.Join(in, "locked.pdf"), []byte("%PDF-1.7\n1 0 obj garbage\n%%EOF\n"), 0o644)
	sluice := func(args ...string) string {
		t.Helper()
		code, out, errs := run(t, append(args, "--data", data)...)
		if code != 0 {
			t.Fatalf("sluice %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
		}
		return out
	}
	if out := sluice("ingest", in); !strings.Contains(out, "0 documents, 2 errors") {
		t.Fatalf("ingest:\n%s", out)
	}
	sluice("job", "retry", "1")
	// The retry is in the audit log, made by the local user, in the retry's transaction.
	n, err := node.Open(t.Context(), node.Config{DataDir: data, Engine: true})
	if err != nil {
		t.Fatal(err)
	}
	es, err := audit.List(t.Context(), n.Store, audit.ListParams{})
	n.Close()
	if err != nil || len(es) != 1 || es[0].Action != "retry" || es[0].JobID != 1 || es[0].Who != audit.LocalUser() {
		t.Errorf("the audit log after `job retry 1`: %+v %v", es, err)
	}
	if out := sluice("resume"); !strings.Contains(out, "job 1 complete") || !strings.Contains(out, "0 documents, 2 errors") {
		t.Errorf("resume after the retry:\n%s", out)
	}
	for _, id := range []string{"1", "2"} {
		if out := sluice("documents", "show", id); !strings.Contains(out, "read pdf") && !strings.Contains(out, "pdfinfo") {
			t.Errorf("documents show %s after the retry:\n%s", id, out)
		}
	}
	out := sluice("job", "show", "1", "--output", "json")
	var show struct {
		Items []struct {
			Name     string `json:"name"`
			Error    string `json:"error"`
			Attempts []struct {
				Step, State string
				Attempt     int
			} `json:"attempts"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &show); err != nil {
		t.Fatalf("job show --output json: %v\n%s", err, out)
	}
	for _, it := range show.Items {
		var pdf []string
		for _, a := range it.Attempts {
			if a.Step == "pdf" {
				pdf = append(pdf, fmt.Sprintf("%d %s", a.Attempt, a.State))
			}
		}
		if it.Error == "" || strings.Join(pdf, ", ") != "1 failed, 2 failed" {
			t.Errorf("%s after the retry: error %q, pdf attempts %q; want an error and both failed attempts", it.Name, it.Error, pdf)
		}
	}
	if out := sluice("job", "show", "1"); !strings.Contains(out, "attempts of the items that failed") {
		t.Errorf("job show has no attempt history:\n%s", out)
	}
	// The job's history: both pdf attempts of each file, with their errors, in the table and
	// in JSON; --limit 1 reads one task and says there is more.
	var hist []struct {
		ItemID      int64    `json:"item_id"`
		Step        string   `json:"step"`
		Attempt     int      `json:"attempt"`
		State       string   `json:"state"`
		Error       string   `json:"error"`
		DurationSec *float64 `json:"duration_seconds"`
	}
	out = sluice("job", "history", "1", "--output", "json")
	if err := json.Unmarshal([]byte(out), &hist); err != nil {
		t.Fatalf("job history --output json: %v\n%s", err, out)
	}
	failed := 0
	for _, a := range hist {
		if a.Step == "pdf" && a.State == "failed" && a.Error != "" && a.DurationSec != nil {
			failed++
		}
	}
	if failed != 4 {
		t.Errorf("job history lists %d failed pdf attempts with an error and a duration, want 4 (two files, two runs):\n%s", failed, out)
	}
	table := sluice("job", "history", "1")
	if lines := strings.Split(strings.TrimSpace(table), "\n"); len(lines) != len(hist)+1 || !strings.HasPrefix(lines[0], "ITEM") || !strings.Contains(table, " pdf ") {
		t.Errorf("job history's table has %d lines for %d attempts:\n%s", len(lines), len(hist), table)
	}
	// job list finds the job by workflow, text and day, and says so when --limit cuts it.
	for args, want := range map[string]int{"--workflow documents": 1, "--workflow nope": 0, "--search documents --state complete": 1,
		"--from 2000-01-01 --until 2000-01-02": 0} {
		out := sluice(append([]string{"job", "list"}, strings.Fields(args)...)...)
		if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines)-1 != want || !strings.HasPrefix(lines[0], "ID") {
			t.Errorf("job list %s:\n%s\nwant %d jobs", args, out, want)
		}
	}
	if code, _, errs := run(t, "job", "list", "--meta", "nokey", "--data", data); code != ExitUsage || !strings.Contains(errs, `--meta "nokey"`) {
		t.Errorf("job list --meta nokey: exit %d, %q; want a usage error naming --meta", code, errs)
	}
	code, _, errs := run(t, "job", "history", "1", "--limit", "1", "--data", data)
	if code != 0 || !strings.Contains(errs, "more tasks than the 1 shown") {
		t.Errorf("job history --limit 1: exit %d, stderr %q; want it to say it truncated", code, errs)
	}
}
